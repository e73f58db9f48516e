package kubepool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opensandbox-go/opensandbox/internal/kubetest"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

// These tests run against a real kube-apiserver and etcd with the
// OpenSandbox CRDs installed (internal/kubetest), so the CRD's own schema
// and CEL rules are the apiserver's.

const testTemplate = `{"metadata":{"labels":{"app":"sandbox"}},"spec":{"containers":[{"name":"sandbox","image":"opensandbox/base:latest","command":["sleep","infinity"]}]}}`

func testPool(name string) runtime.Pool {
	return runtime.Pool{
		Name:         name,
		Template:     json.RawMessage(testTemplate),
		CapacitySpec: runtime.PoolCapacity{BufferMax: 3, BufferMin: 1, PoolMax: 5, PoolMin: 0},
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestPools(t *testing.T) {
	env := kubetest.Start(t)
	t.Run("Lifecycle", func(t *testing.T) { testLifecycle(t, env) })
	t.Run("AlreadyExists", func(t *testing.T) { testAlreadyExists(t, env) })
	t.Run("NotFound", func(t *testing.T) { testNotFound(t, env) })
	t.Run("UpdateKeepsOtherChanges", func(t *testing.T) { testUpdateKeepsOtherChanges(t, env) })
	t.Run("ConcurrentUpdates", func(t *testing.T) { testConcurrentUpdates(t, env) })
	t.Run("Validation", func(t *testing.T) { testValidation(t, env) })
	t.Run("APIServerValidation", func(t *testing.T) { testAPIServerValidation(t, env) })
	t.Run("NamespaceScoped", func(t *testing.T) { testNamespaceScoped(t, env) })
	t.Run("NoCRD", func(t *testing.T) { testNoCRD(t, env) })
}

func testLifecycle(t *testing.T, env *kubetest.Env) {
	ns := env.Namespace(t)
	p := New(env.Client, ns)
	ctx := ctxT(t)
	before := time.Now().Add(-2 * time.Second).Truncate(time.Second)

	created, err := p.CreatePool(ctx, testPool("warm"))
	if err != nil {
		t.Fatalf("CreatePool: %v", err)
	}
	if created.Name != "warm" || created.CapacitySpec != testPool("").CapacitySpec {
		t.Errorf("created = %+v", created)
	}
	if created.CreatedAt.Before(before) || created.CreatedAt.After(time.Now().Add(2*time.Second)) {
		t.Errorf("createdAt = %v, want about now", created.CreatedAt)
	}
	var tmpl corev1.PodTemplateSpec
	if err := json.Unmarshal(created.Template, &tmpl); err != nil {
		t.Fatalf("template %s: %v", created.Template, err)
	}
	if len(tmpl.Spec.Containers) != 1 || tmpl.Spec.Containers[0].Image != "opensandbox/base:latest" || tmpl.Labels["app"] != "sandbox" {
		t.Errorf("template = %s", created.Template)
	}

	// The object in the cluster is what was asked, with the CRD's defaults.
	var obj sandboxv1alpha1.Pool
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "warm"}, &obj); err != nil {
		t.Fatalf("get Pool: %v", err)
	}
	if obj.Spec.CapacitySpec != (sandboxv1alpha1.CapacitySpec{BufferMax: 3, BufferMin: 1, PoolMax: 5}) {
		t.Errorf("stored capacity = %+v", obj.Spec.CapacitySpec)
	}
	if obj.Spec.RecycleStrategy == nil || obj.Spec.RecycleStrategy.Type != sandboxv1alpha1.RecycleDelete {
		t.Errorf("recycleStrategy = %+v, want the CRD default Delete", obj.Spec.RecycleStrategy)
	}

	// The status the operator writes is reported.
	obj.Status = sandboxv1alpha1.PoolStatus{Total: 4, Allocated: 1, Available: 2, Updated: 4, Revision: "abc123"}
	if err := env.Client.Status().Update(ctx, &obj); err != nil {
		t.Fatalf("status update: %v", err)
	}
	got, err := p.GetPool(ctx, "warm")
	if err != nil {
		t.Fatalf("GetPool: %v", err)
	}
	if want := (runtime.PoolStatus{Total: 4, Allocated: 1, Available: 2, Revision: "abc123"}); got.Status != want {
		t.Errorf("status = %+v, want %+v", got.Status, want)
	}
	if !got.CreatedAt.Equal(created.CreatedAt) {
		t.Errorf("GetPool createdAt %v != CreatePool's %v", got.CreatedAt, created.CreatedAt)
	}

	if _, err := p.CreatePool(ctx, testPool("second")); err != nil {
		t.Fatalf("CreatePool second: %v", err)
	}
	list, err := p.ListPools(ctx)
	if err != nil {
		t.Fatalf("ListPools: %v", err)
	}
	if names := poolNames(list); names != "second,warm" {
		t.Errorf("ListPools = %s, want second,warm", names)
	}

	updated, err := p.UpdatePoolCapacity(ctx, "warm", runtime.PoolCapacity{BufferMax: 10, BufferMin: 4, PoolMax: 20, PoolMin: 2})
	if err != nil {
		t.Fatalf("UpdatePoolCapacity: %v", err)
	}
	if want := (runtime.PoolCapacity{BufferMax: 10, BufferMin: 4, PoolMax: 20, PoolMin: 2}); updated.CapacitySpec != want {
		t.Errorf("updated capacity = %+v, want %+v", updated.CapacitySpec, want)
	}
	if updated.Status.Revision != "abc123" || string(updated.Template) != string(got.Template) {
		t.Errorf("update changed more than the capacity: %+v", updated)
	}
	// Zero is a capacity like any other (the merge patch must not drop it).
	zero, err := p.UpdatePoolCapacity(ctx, "warm", runtime.PoolCapacity{})
	if err != nil {
		t.Fatalf("UpdatePoolCapacity to zero: %v", err)
	}
	if zero.CapacitySpec != (runtime.PoolCapacity{}) {
		t.Errorf("capacity after update to zero = %+v", zero.CapacitySpec)
	}

	if err := p.DeletePool(ctx, "warm"); err != nil {
		t.Fatalf("DeletePool: %v", err)
	}
	// Without a controller-manager nothing holds a finalizer: the Pool is
	// gone once the delete returns.
	if _, err := p.GetPool(ctx, "warm"); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("GetPool after delete: %v, want ErrNotFound", err)
	}
	list, err = p.ListPools(ctx)
	if err != nil {
		t.Fatalf("ListPools: %v", err)
	}
	if names := poolNames(list); names != "second" {
		t.Errorf("ListPools after delete = %s, want second", names)
	}
}

func poolNames(list []runtime.Pool) string {
	names := make([]string, len(list))
	for i, p := range list {
		names[i] = p.Name
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}

func testAlreadyExists(t *testing.T, env *kubetest.Env) {
	p := New(env.Client, env.Namespace(t))
	ctx := ctxT(t)
	if _, err := p.CreatePool(ctx, testPool("dup")); err != nil {
		t.Fatalf("CreatePool: %v", err)
	}
	other := testPool("dup")
	other.CapacitySpec.PoolMax = 9
	_, err := p.CreatePool(ctx, other)
	if !errors.Is(err, runtime.ErrConflict) {
		t.Fatalf("second CreatePool: %v, want ErrConflict", err)
	}
	if err.Error() != `pool "dup" already exists` {
		t.Errorf("message = %q", err)
	}
	got, err := p.GetPool(ctx, "dup")
	if err != nil || got.CapacitySpec.PoolMax != 5 {
		t.Errorf("the first pool changed: %+v, %v", got.CapacitySpec, err)
	}
}

func testNotFound(t *testing.T, env *kubetest.Env) {
	p := New(env.Client, env.Namespace(t))
	ctx := ctxT(t)
	for _, name := range []string{"missing", "Not_A_Name"} {
		if _, err := p.GetPool(ctx, name); !errors.Is(err, runtime.ErrNotFound) {
			t.Errorf("GetPool(%q): %v, want ErrNotFound", name, err)
		}
		if _, err := p.UpdatePoolCapacity(ctx, name, runtime.PoolCapacity{BufferMax: 1, PoolMax: 1}); !errors.Is(err, runtime.ErrNotFound) {
			t.Errorf("UpdatePoolCapacity(%q): %v, want ErrNotFound", name, err)
		}
		if err := p.DeletePool(ctx, name); !errors.Is(err, runtime.ErrNotFound) {
			t.Errorf("DeletePool(%q): %v, want ErrNotFound", name, err)
		}
	}
	// A merge patch must not create the object it patches.
	var list sandboxv1alpha1.PoolList
	if err := env.Client.List(ctx, &list, client.InNamespace(p.Namespace())); err != nil || len(list.Items) != 0 {
		t.Errorf("pools after not-found calls: %d, %v", len(list.Items), err)
	}
}

// A capacity update made from an old read neither fails nor undoes a
// change someone else made since.
func testUpdateKeepsOtherChanges(t *testing.T, env *kubetest.Env) {
	ns := env.Namespace(t)
	p := New(env.Client, ns)
	ctx := ctxT(t)
	if _, err := p.CreatePool(ctx, testPool("shared")); err != nil {
		t.Fatalf("CreatePool: %v", err)
	}
	// Someone else changes the template and the recycle strategy.
	var obj sandboxv1alpha1.Pool
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "shared"}, &obj); err != nil {
		t.Fatal(err)
	}
	obj.Spec.Template.Labels["team"] = "data"
	obj.Spec.RecycleStrategy = &sandboxv1alpha1.RecycleStrategy{Type: sandboxv1alpha1.RecycleNoop}
	if err := env.Client.Update(ctx, &obj); err != nil {
		t.Fatalf("concurrent update: %v", err)
	}
	if _, err := p.UpdatePoolCapacity(ctx, "shared", runtime.PoolCapacity{BufferMax: 7, BufferMin: 7, PoolMax: 7, PoolMin: 7}); err != nil {
		t.Fatalf("UpdatePoolCapacity: %v", err)
	}
	var after sandboxv1alpha1.Pool
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "shared"}, &after); err != nil {
		t.Fatal(err)
	}
	if after.Spec.Template.Labels["team"] != "data" || after.Spec.RecycleStrategy.Type != sandboxv1alpha1.RecycleNoop {
		t.Errorf("the other writer's change was lost: labels %v, recycle %+v", after.Spec.Template.Labels, after.Spec.RecycleStrategy)
	}
	if after.Spec.CapacitySpec != (sandboxv1alpha1.CapacitySpec{BufferMax: 7, BufferMin: 7, PoolMax: 7, PoolMin: 7}) {
		t.Errorf("capacity = %+v", after.Spec.CapacitySpec)
	}
}

// Concurrent capacity updates all succeed (no conflict errors), and the
// pool ends with one of the capacities asked for, never a mix.
func testConcurrentUpdates(t *testing.T, env *kubetest.Env) {
	p := New(env.Client, env.Namespace(t))
	ctx := ctxT(t)
	if _, err := p.CreatePool(ctx, testPool("busy")); err != nil {
		t.Fatalf("CreatePool: %v", err)
	}
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v := int32(i + 1)
			if _, err := p.UpdatePoolCapacity(ctx, "busy", runtime.PoolCapacity{BufferMax: v, BufferMin: v, PoolMax: 10 * v, PoolMin: v}); err != nil {
				errs <- fmt.Errorf("update %d: %w", i, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got, err := p.GetPool(ctx, "busy")
	if err != nil {
		t.Fatal(err)
	}
	c := got.CapacitySpec
	if c.BufferMax < 1 || c.BufferMax > n || c.BufferMin != c.BufferMax || c.PoolMin != c.BufferMax || c.PoolMax != 10*c.BufferMax {
		t.Errorf("final capacity %+v is not one of those written", c)
	}
}

func testValidation(t *testing.T, env *kubetest.Env) {
	p := New(env.Client, env.Namespace(t))
	ctx := ctxT(t)
	withTemplate := func(s string) runtime.Pool {
		rp := testPool("v")
		rp.Template = json.RawMessage(s)
		return rp
	}
	withCapacity := func(c runtime.PoolCapacity) runtime.Pool {
		rp := testPool("v")
		rp.CapacitySpec = c
		return rp
	}
	withName := func(n string) runtime.Pool {
		rp := testPool(n)
		return rp
	}
	for _, tc := range []struct {
		name string
		pool runtime.Pool
		want string // the start of the message: the field
	}{
		{"empty name", withName(""), "name: required"},
		{"upper case", withName("Warm"), "name: "},
		{"underscore", withName("warm_pool"), "name: "},
		{"too long for a label", withName(strings.Repeat("a", 64)), "name: "},
		{"negative bufferMax", withCapacity(runtime.PoolCapacity{BufferMax: -1}), "capacitySpec.bufferMax:"},
		{"negative poolMin", withCapacity(runtime.PoolCapacity{BufferMax: 1, PoolMax: 1, PoolMin: -2}), "capacitySpec.poolMin:"},
		{"bufferMin above bufferMax", withCapacity(runtime.PoolCapacity{BufferMax: 1, BufferMin: 2, PoolMax: 5}), "capacitySpec.bufferMin:"},
		{"poolMin above poolMax", withCapacity(runtime.PoolCapacity{BufferMax: 1, PoolMax: 1, PoolMin: 2}), "capacitySpec.poolMin:"},
		{"no template", withTemplate(""), "template: required"},
		{"null template", withTemplate("null"), "template: required"},
		{"template not an object", withTemplate(`"pod"`), "template: not a valid pod template"},
		{"wrong type", withTemplate(`{"spec":{"containers":[{"name":"a","image":"b","command":"sleep"}]}}`), "template: not a valid pod template: field spec.containers.command"},
		{"unknown field", withTemplate(`{"spec":{"containers":[{"name":"a","image":"b","imag":"c"}]}}`), `template: not a valid pod template: unknown field "imag"`},
		{"no containers", withTemplate(`{"spec":{}}`), "template.spec.containers:"},
		{"container without image", withTemplate(`{"spec":{"containers":[{"name":"a"}]}}`), "template.spec.containers[0].image:"},
		{"container without name", withTemplate(`{"spec":{"containers":[{"name":"a","image":"b"},{"image":"c"}]}}`), "template.spec.containers[1].name:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.CreatePool(ctx, tc.pool)
			if !errors.Is(err, runtime.ErrInvalid) {
				t.Fatalf("CreatePool: %v, want ErrInvalid", err)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("message %q does not start with %q", err, tc.want)
			}
		})
	}
	// The longest name a label allows is fine.
	if _, err := p.CreatePool(ctx, withName(strings.Repeat("a", 63))); err != nil {
		t.Errorf("63-character name: %v", err)
	}
	if _, err := p.UpdatePoolCapacity(ctx, strings.Repeat("a", 63), runtime.PoolCapacity{BufferMin: 2, BufferMax: 1}); !errors.Is(err, runtime.ErrInvalid) ||
		!strings.HasPrefix(err.Error(), "capacitySpec.bufferMin:") {
		t.Errorf("UpdatePoolCapacity with bufferMin > bufferMax: %v", err)
	}
	list, err := p.ListPools(ctx)
	if err != nil || poolNames(list) != strings.Repeat("a", 63) {
		t.Errorf("pools after refused creates: %s, %v", poolNames(list), err)
	}
}

// What only the apiserver checks (the CRD's schema and CEL rules) comes
// back as ErrInvalid with the apiserver's message, which names the field.
func testAPIServerValidation(t *testing.T, env *kubetest.Env) {
	ns := env.Namespace(t)
	p := New(env.Client, ns)
	ctx := ctxT(t)

	// Duplicate env names break the schema's list-map of env (by name).
	rp := testPool("dupenv")
	rp.Template = json.RawMessage(`{"spec":{"containers":[{"name":"a","image":"b","env":[{"name":"X","value":"1"},{"name":"X","value":"2"}]}]}}`)
	_, err := p.CreatePool(ctx, rp)
	if !errors.Is(err, runtime.ErrInvalid) {
		t.Fatalf("CreatePool with duplicate env: %v, want ErrInvalid", err)
	}
	if !strings.Contains(err.Error(), "spec.template.spec.containers[0].env[1]") || !strings.Contains(err.Error(), "Duplicate value") {
		t.Errorf("message %q does not name the field", err)
	}

	// The CEL rule on the capacity, reached by a write that skips our own
	// checks, is mapped the same way.
	obj := &sandboxv1alpha1.Pool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cel"},
		Spec: sandboxv1alpha1.PoolSpec{
			Template:     corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Image: "b"}}}},
			CapacitySpec: sandboxv1alpha1.CapacitySpec{BufferMax: 1, BufferMin: 2, PoolMax: 3},
		},
	}
	err = p.classify(env.Client.Create(ctx, obj), "creating", "cel")
	if !errors.Is(err, runtime.ErrInvalid) {
		t.Fatalf("classified CEL refusal: %v, want ErrInvalid", err)
	}
	if !strings.Contains(err.Error(), "spec.capacitySpec.bufferMin") || !strings.Contains(err.Error(), "bufferMin must not exceed bufferMax") {
		t.Errorf("message %q lacks the field or the rule's message", err)
	}
}

// A Pools only sees its own namespace.
func testNamespaceScoped(t *testing.T, env *kubetest.Env) {
	a, b := New(env.Client, env.Namespace(t)), New(env.Client, env.Namespace(t))
	ctx := ctxT(t)
	if _, err := a.CreatePool(ctx, testPool("mine")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.GetPool(ctx, "mine"); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("GetPool from another namespace: %v, want ErrNotFound", err)
	}
	if list, err := b.ListPools(ctx); err != nil || len(list) != 0 {
		t.Errorf("ListPools from another namespace: %d pools, %v", len(list), err)
	}
	if _, err := b.CreatePool(ctx, testPool("mine")); err != nil {
		t.Errorf("the same name in another namespace: %v", err)
	}
}

// A cluster without the CRDs answers ErrNotSupported; one that cannot be
// reached, ErrUnavailable.
func testNoCRD(t *testing.T, env *kubetest.Env) {
	ctx := ctxT(t)
	noKinds, err := client.New(env.Config, client.Options{Scheme: env.Scheme, Mapper: meta.NewDefaultRESTMapper(nil)})
	if err != nil {
		t.Fatal(err)
	}
	p := New(noKinds, "default")
	if _, err := p.ListPools(ctx); !errors.Is(err, runtime.ErrNotSupported) || !strings.Contains(err.Error(), "install the OpenSandbox CRDs") {
		t.Errorf("ListPools without the kind: %v, want ErrNotSupported", err)
	}
	if _, err := p.CreatePool(ctx, testPool("x")); !errors.Is(err, runtime.ErrNotSupported) {
		t.Errorf("CreatePool without the kind: %v, want ErrNotSupported", err)
	}

	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(sandboxv1alpha1.GroupVersion.WithKind("Pool"), meta.RESTScopeNamespace)
	mapper.Add(sandboxv1alpha1.GroupVersion.WithKind("PoolList"), meta.RESTScopeNamespace)
	gone := rest.CopyConfig(env.Config)
	gone.Host = "https://127.0.0.1:1"
	gone.Timeout = 5 * time.Second
	down, err := client.New(gone, client.Options{Scheme: env.Scheme, Mapper: mapper})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(down, "default").GetPool(ctx, "x"); !errors.Is(err, runtime.ErrUnavailable) {
		t.Errorf("GetPool on an unreachable apiserver: %v, want ErrUnavailable", err)
	}
}
