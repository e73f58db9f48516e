// Package kubepool implements runtime.Pools on the Pool resource
// (sandbox.opensandbox.io/v1alpha1) that the OpenSandbox operator serves:
// the server's /pools routes create, list, read, resize and delete Pools in
// one namespace through a controller-runtime client.
//
// Requests are checked before they reach the apiserver (the name, the
// capacity numbers, the template), with messages naming the field; what
// the apiserver still refuses (the CRD's own OpenAPI and CEL rules) comes
// back as runtime.ErrInvalid carrying the apiserver's message. A capacity
// update is a JSON merge patch of spec.capacitySpec alone, so it never
// overwrites a concurrent change to the rest of the Pool and needs no
// retry.
//
// The Kubernetes runtime driver embeds *Pools; it can be used on its own
// with any client whose scheme knows the OpenSandbox kinds.
package kubepool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opensandbox-go/opensandbox/internal/kubeerr"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

// Pools manages the Pools of one namespace. It is safe for concurrent use.
type Pools struct {
	c  client.Client
	ns string
}

var _ runtime.Pools = (*Pools)(nil)

// New returns Pools on c in namespace ns. c's scheme must know the
// OpenSandbox kinds (sandboxv1alpha1.AddToScheme).
func New(c client.Client, namespace string) *Pools {
	return &Pools{c: c, ns: namespace}
}

// Namespace is the namespace the pools live in.
func (p *Pools) Namespace() string { return p.ns }

// CreatePool creates a Pool from in's name, template and capacity.
func (p *Pools) CreatePool(ctx context.Context, in runtime.Pool) (runtime.Pool, error) {
	if err := ValidateName(in.Name); err != nil {
		return runtime.Pool{}, err
	}
	if err := ValidateCapacity(in.CapacitySpec); err != nil {
		return runtime.Pool{}, err
	}
	tmpl, err := DecodeTemplate(in.Template)
	if err != nil {
		return runtime.Pool{}, err
	}
	obj := &sandboxv1alpha1.Pool{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: in.Name},
		Spec: sandboxv1alpha1.PoolSpec{
			Template:     tmpl,
			CapacitySpec: toCapacity(in.CapacitySpec),
		},
	}
	if err := p.c.Create(ctx, obj); err != nil {
		return runtime.Pool{}, p.classify(err, "creating", in.Name)
	}
	return fromPool(obj)
}

// ListPools returns the namespace's Pools.
func (p *Pools) ListPools(ctx context.Context) ([]runtime.Pool, error) {
	var list sandboxv1alpha1.PoolList
	if err := p.c.List(ctx, &list, client.InNamespace(p.ns)); err != nil {
		return nil, p.classify(err, "listing", "")
	}
	out := make([]runtime.Pool, 0, len(list.Items))
	for i := range list.Items {
		rp, err := fromPool(&list.Items[i])
		if err != nil {
			return nil, err
		}
		out = append(out, rp)
	}
	return out, nil
}

// GetPool returns the Pool called name.
func (p *Pools) GetPool(ctx context.Context, name string) (runtime.Pool, error) {
	if err := checkName(name); err != nil {
		return runtime.Pool{}, err
	}
	var obj sandboxv1alpha1.Pool
	if err := p.c.Get(ctx, types.NamespacedName{Namespace: p.ns, Name: name}, &obj); err != nil {
		return runtime.Pool{}, p.classify(err, "reading", name)
	}
	return fromPool(&obj)
}

// UpdatePoolCapacity sets spec.capacitySpec of the Pool called name with a
// JSON merge patch: the rest of the Pool, and changes others make to it
// meanwhile, are left alone.
func (p *Pools) UpdatePoolCapacity(ctx context.Context, name string, c runtime.PoolCapacity) (runtime.Pool, error) {
	if err := checkName(name); err != nil {
		return runtime.Pool{}, err
	}
	if err := ValidateCapacity(c); err != nil {
		return runtime.Pool{}, err
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"capacitySpec": toCapacity(c)}})
	if err != nil {
		return runtime.Pool{}, fmt.Errorf("kubepool: encoding the capacity patch: %w", err)
	}
	obj := &sandboxv1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: name}}
	if err := p.c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return runtime.Pool{}, p.classify(err, "updating the capacity of", name)
	}
	return fromPool(obj)
}

// DeletePool deletes the Pool called name; the operator's garbage
// collection removes its pods (they are owned by the Pool).
func (p *Pools) DeletePool(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	obj := &sandboxv1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: name}}
	if err := p.c.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		return p.classify(err, "deleting", name)
	}
	return nil
}

// MaxNameLength is the longest pool name accepted: the name is the value
// of the label sandboxv1alpha1.LabelPoolName on every pod of the pool, and
// label values are at most 63 characters.
const MaxNameLength = validation.LabelValueMaxLength

// ValidateName checks that name can name a Pool: a DNS-1123 subdomain
// (lower-case letters, digits, '-' and '.', starting and ending with a
// letter or digit) of at most MaxNameLength characters. The error is an
// ErrInvalid naming the field "name".
func ValidateName(name string) error {
	if name == "" {
		return invalidf("name: required")
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return invalidf("name: %q is not a valid pool name: %s", name, strings.Join(msgs, "; "))
	}
	if len(name) > MaxNameLength {
		return invalidf("name: %q is %d characters long; a pool name has at most %d (it labels the pool's pods)", name, len(name), MaxNameLength)
	}
	return nil
}

// checkName is ValidateName for names of existing pools: a name that
// cannot name a pool names none, so it is not found rather than invalid.
func checkName(name string) error {
	if ValidateName(name) != nil {
		return &poolError{msg: fmt.Sprintf("pool %q not found", name), class: runtime.ErrNotFound}
	}
	return nil
}

// ValidateCapacity checks c as the CRD does: every number at least 0,
// bufferMin ≤ bufferMax and poolMin ≤ poolMax. The error is an ErrInvalid
// naming the field under capacitySpec.
func ValidateCapacity(c runtime.PoolCapacity) error {
	for _, f := range []struct {
		name string
		v    int32
	}{{"bufferMax", c.BufferMax}, {"bufferMin", c.BufferMin}, {"poolMax", c.PoolMax}, {"poolMin", c.PoolMin}} {
		if f.v < 0 {
			return invalidf("capacitySpec.%s: %d is negative; it must be 0 or more", f.name, f.v)
		}
	}
	if c.BufferMin > c.BufferMax {
		return invalidf("capacitySpec.bufferMin: %d exceeds bufferMax %d", c.BufferMin, c.BufferMax)
	}
	if c.PoolMin > c.PoolMax {
		return invalidf("capacitySpec.poolMin: %d exceeds poolMax %d", c.PoolMin, c.PoolMax)
	}
	return nil
}

// DecodeTemplate parses a pod template (a PodTemplateSpec as JSON)
// strictly: an unknown field is refused rather than silently dropped, and
// the template must have at least one container, each with a name and an
// image. Errors are ErrInvalid naming the field under "template".
func DecodeTemplate(raw json.RawMessage) (corev1.PodTemplateSpec, error) {
	var t corev1.PodTemplateSpec
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return t, invalidf("template: required (a pod template with at least one container)")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return t, invalidf("template: not a valid pod template: %s", jsonProblem(err))
	}
	if dec.More() {
		return t, invalidf("template: trailing data after the pod template")
	}
	if len(t.Spec.Containers) == 0 {
		return t, invalidf("template.spec.containers: at least one container is required")
	}
	for i, c := range t.Spec.Containers {
		if c.Name == "" {
			return t, invalidf("template.spec.containers[%d].name: required", i)
		}
		if c.Image == "" {
			return t, invalidf("template.spec.containers[%d].image: required", i)
		}
	}
	return t, nil
}

// jsonProblem describes a JSON decoding error with the field it concerns.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Sprintf("field %s: cannot take a JSON %s", te.Field, te.Value)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

func toCapacity(c runtime.PoolCapacity) sandboxv1alpha1.CapacitySpec {
	return sandboxv1alpha1.CapacitySpec{BufferMax: c.BufferMax, BufferMin: c.BufferMin, PoolMax: c.PoolMax, PoolMin: c.PoolMin}
}

// fromPool is the runtime's view of a Pool.
func fromPool(obj *sandboxv1alpha1.Pool) (runtime.Pool, error) {
	tmpl, err := json.Marshal(obj.Spec.Template)
	if err != nil {
		return runtime.Pool{}, fmt.Errorf("kubepool: encoding the template of pool %s: %w", obj.Name, err)
	}
	c := obj.Spec.CapacitySpec
	return runtime.Pool{
		Name:         obj.Name,
		Template:     tmpl,
		CapacitySpec: runtime.PoolCapacity{BufferMax: c.BufferMax, BufferMin: c.BufferMin, PoolMax: c.PoolMax, PoolMin: c.PoolMin},
		Status: runtime.PoolStatus{
			Total:     obj.Status.Total,
			Allocated: obj.Status.Allocated,
			Available: obj.Status.Available,
			Revision:  obj.Status.Revision,
		},
		CreatedAt: obj.CreationTimestamp.Time,
	}, nil
}

// poolError is an error of a runtime class whose message is meant for the
// API's caller as it is.
type poolError struct {
	msg   string
	class error
	cause error
}

func (e *poolError) Error() string { return e.msg }

// Unwrap makes the error both its class and its cause.
func (e *poolError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.class}
	}
	return []error{e.class, e.cause}
}

func invalidf(format string, args ...any) error {
	return &poolError{msg: fmt.Sprintf(format, args...), class: runtime.ErrInvalid}
}

// classify turns an error of the apiserver about the pool called name
// (name "" for the whole namespace) into the runtime's classes; what fits
// none is wrapped with the operation and stays unclassified.
func (p *Pools) classify(err error, verb, name string) error {
	subject := fmt.Sprintf("pool %q", name)
	if name == "" {
		subject = "pools"
	}
	var se apierrors.APIStatus
	msg := err.Error()
	if errors.As(err, &se) && se.Status().Message != "" {
		msg = se.Status().Message
	}
	switch {
	case apierrors.IsNotFound(err):
		return &poolError{msg: subject + " not found", class: runtime.ErrNotFound, cause: err}
	case apierrors.IsAlreadyExists(err):
		return &poolError{msg: subject + " already exists", class: runtime.ErrConflict, cause: err}
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return &poolError{msg: msg, class: runtime.ErrInvalid, cause: err}
	case meta.IsNoMatchError(err):
		return &poolError{
			msg:   "the cluster does not serve the Pool resource (sandbox.opensandbox.io/v1alpha1): install the OpenSandbox CRDs",
			class: runtime.ErrNotSupported, cause: err,
		}
	case kubeerr.Class(err) == runtime.ErrUnavailable:
		return &poolError{msg: fmt.Sprintf("%s %s: the Kubernetes API is unavailable: %s", verb, subject, msg), class: runtime.ErrUnavailable, cause: err}
	}
	return fmt.Errorf("%s %s in namespace %s: %w", verb, subject, p.ns, err)
}
