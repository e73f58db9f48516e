package kubernetes

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/opensandbox-go/opensandbox/internal/execd/readiness"
	"github.com/opensandbox-go/opensandbox/internal/grammar"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// Labels and annotations the driver keeps; everything Get and List report
// comes from them and from the objects' own fields.
const (
	prefix = grammar.ReservedLabelPrefix

	// labelID marks every object of sandbox ID (BatchSandbox, pod, Secrets).
	labelID = prefix + "id"
	// labelSnapshotID marks the SandboxSnapshots CommitSnapshot made.
	labelSnapshotID = prefix + "snapshot-id"
	// labelSnapshotOf names the sandbox a snapshot was made of.
	labelSnapshotOf = prefix + "snapshot-of"

	annEntrypoint = prefix + "entrypoint" // JSON array
	annImage      = prefix + "image"
	annSnapshotID = prefix + "snapshot-id"
	annPlatform   = prefix + "platform"  // JSON of runtime.Platform
	annResources  = prefix + "resources" // JSON of runtime.Resources
	annPoolRef    = prefix + "pool-ref"

	// Keys of the Secret ID.
	keyExecdToken  = "execd-token"
	keyEgressToken = "egress-token"

	mainContainer  = "main"
	initContainer  = "execd-installer"
	execdVolume    = "opensandbox-bin"
	execdDir       = "/opt/opensandbox"
	execdBinary    = execdDir + "/execd"
	execdTokenEnv  = "EXECD_ACCESS_TOKEN"
	gpuResource    = corev1.ResourceName("nvidia.com/gpu")
	gracePeriod    = int64(1)
	pullSecretName = "-pull"
)

// podName is the name the operator gives the one pod of BatchSandbox id.
func podName(id string) string { return id + "-0" }

// pullSecret names the image-pull Secret of sandbox id.
func pullSecret(id string) string { return id + pullSecretName }

// validate checks what the cluster would refuse or what the driver cannot do.
func validate(spec runtime.Spec) error {
	switch {
	case spec.ID == "":
		return fmt.Errorf("kubernetes: create: empty sandbox id: %w", runtime.ErrInvalid)
	case len(spec.ID) > 63-len(pullSecretName):
		return fmt.Errorf("kubernetes: create: sandbox id %q is longer than %d characters: %w", spec.ID, 63-len(pullSecretName), runtime.ErrInvalid)
	case spec.PoolRef == "" && (len(spec.Entrypoint) == 0 || spec.Entrypoint[0] == ""):
		return fmt.Errorf("kubernetes: sandbox %s: empty entrypoint: %w", spec.ID, runtime.ErrInvalid)
	case spec.PoolRef == "" && spec.Image == "" && spec.SnapshotID == "":
		return fmt.Errorf("kubernetes: sandbox %s: no image and no snapshot: %w", spec.ID, runtime.ErrInvalid)
	case spec.Resources.NanoCPUs < 0 || spec.Resources.MemoryBytes < 0 || spec.Resources.GPUs < -1 || spec.Resources.DiskBytes < 0:
		return fmt.Errorf("kubernetes: sandbox %s: negative resource limit: %w", spec.ID, runtime.ErrInvalid)
	case spec.Resources.GPUs == -1:
		return fmt.Errorf("kubernetes: sandbox %s: \"all GPUs\" has no meaning on a cluster, ask for a number: %w", spec.ID, runtime.ErrNotSupported)
	}
	if err := grammar.CheckDNSLabel(spec.ID); err != nil {
		return fmt.Errorf("kubernetes: create: sandbox id %q cannot name a resource: %w", spec.ID, err)
	}
	if spec.PoolRef != "" {
		if spec.PoolRef != sandboxv1alpha1.PoolRefAny {
			if err := grammar.CheckDNSSubdomain(spec.PoolRef); err != nil {
				return fmt.Errorf("kubernetes: sandbox %s: poolRef: %w", spec.ID, err)
			}
		}
		// The pool's template decides the pod; these would change it.
		for what, given := range map[string]bool{
			"volumes": len(spec.Volumes) > 0, "a snapshot": spec.SnapshotID != "",
			"a platform": spec.Platform != nil, "image credentials": spec.ImageAuth != nil,
			"isolated execution": spec.IsolatedExecution, "a network policy": spec.Egress != nil,
		} {
			if given {
				return fmt.Errorf("kubernetes: sandbox %s: %s for a sandbox from a pool (the pool's template decides its pod): %w", spec.ID, what, runtime.ErrNotSupported)
			}
		}
	}
	if err := checkVolumes(spec); err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(extensionAnnotations(spec.Extensions))) {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("kubernetes: sandbox %s: extension %q cannot name the pod annotation %s: %s: %w", spec.ID,
				extensionPrefix+strings.TrimPrefix(k, annExtensionPrefix), k, strings.Join(errs, "; "), runtime.ErrInvalid)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(spec.Metadata)) {
		if err := grammar.CheckLabel(k, spec.Metadata[k]); err != nil {
			return fmt.Errorf("kubernetes: sandbox %s: metadata: %w", spec.ID, err)
		}
	}
	return nil
}

// tokenSecret is the Secret ID holding the sandbox's tokens.
func (r *Runtime) tokenSecret(spec runtime.Spec) *corev1.Secret {
	data := map[string][]byte{keyExecdToken: []byte(spec.ExecdToken)}
	if spec.Egress != nil {
		data[keyEgressToken] = []byte(spec.Egress.Token)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: spec.ID, Namespace: r.ns, Labels: map[string]string{labelID: spec.ID}},
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}
}

// registrySecret is the dockerconfigjson Secret for image.auth, or nil.
func (r *Runtime) registrySecret(spec runtime.Spec) (*corev1.Secret, error) {
	if spec.ImageAuth == nil {
		return nil, nil
	}
	host := registryHost(spec.Image)
	auth := base64.StdEncoding.EncodeToString([]byte(spec.ImageAuth.Username + ":" + spec.ImageAuth.Password))
	cfg, err := json.Marshal(map[string]any{"auths": map[string]any{host: map[string]string{
		"username": spec.ImageAuth.Username, "password": spec.ImageAuth.Password, "auth": auth,
	}}})
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: pullSecret(spec.ID), Namespace: r.ns, Labels: map[string]string{labelID: spec.ID}},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: cfg},
	}, nil
}

// registryHost is the registry part of an image reference; references
// without one are Docker Hub's.
func registryHost(ref string) string {
	first, _, ok := strings.Cut(ref, "/")
	if ok && (strings.ContainsAny(first, ".:") || first == "localhost") {
		return first
	}
	return "https://index.docker.io/v1/"
}

// batchSandbox builds the BatchSandbox of spec running image (the spec's
// image or the snapshot's).
//
// managed lists the claims to delete with the sandbox.
func (r *Runtime) batchSandbox(spec runtime.Spec, image string, pullSecrets, managed []string) (*sandboxv1alpha1.BatchSandbox, error) {
	lbl := map[string]string{labelID: spec.ID}
	for k, v := range spec.Metadata {
		lbl[k] = v
	}
	ann := map[string]string{}
	if len(spec.Entrypoint) > 0 {
		entry, err := json.Marshal(spec.Entrypoint)
		if err != nil {
			return nil, err
		}
		ann[annEntrypoint] = string(entry)
	}
	if spec.Image != "" {
		ann[annImage] = spec.Image
	}
	if spec.SnapshotID != "" {
		ann[annSnapshotID] = spec.SnapshotID
	}
	if len(managed) > 0 {
		ann[annManagedVolumes] = strings.Join(managed, ",")
	}
	if spec.Platform != nil {
		b, _ := json.Marshal(spec.Platform)
		ann[annPlatform] = string(b)
	}
	if spec.Resources != (runtime.Resources{}) {
		b, _ := json.Marshal(spec.Resources)
		ann[annResources] = string(b)
	}
	b := &sandboxv1alpha1.BatchSandbox{
		ObjectMeta: metav1.ObjectMeta{Name: spec.ID, Namespace: r.ns, Labels: lbl, Annotations: ann},
		Spec:       sandboxv1alpha1.BatchSandboxSpec{Replicas: ptr.To(int32(1))},
	}
	if spec.PoolRef != "" {
		// Pool mode: the operator hands over a warm pod of the pool.
		b.Spec.PoolRef = spec.PoolRef
		ann[annPoolRef] = spec.PoolRef
	} else {
		tmpl, err := r.podTemplate(spec, image, pullSecrets)
		if err != nil {
			return nil, err
		}
		b.Spec.Template = tmpl
	}
	if spec.ExpiresAt != nil {
		b.Spec.ExpireTime = &metav1.Time{Time: spec.ExpiresAt.UTC().Truncate(time.Second)}
	}
	return b, nil
}

// podTemplate merges the sandbox's pod into the configured base template.
func (r *Runtime) podTemplate(spec runtime.Spec, image string, pullSecrets []string) (*corev1.PodTemplateSpec, error) {
	t := r.base.DeepCopy()
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	t.Labels[labelID] = spec.ID
	if ann := extensionAnnotations(spec.Extensions); len(ann) > 0 {
		if t.Annotations == nil {
			t.Annotations = map[string]string{}
		}
		maps.Copy(t.Annotations, ann)
	}
	ps := &t.Spec

	// The main container: the template's container of that name (or a new
	// one) with our image, command, environment and limits.
	i := slices.IndexFunc(ps.Containers, func(c corev1.Container) bool { return c.Name == mainContainer })
	if i < 0 {
		ps.Containers = append([]corev1.Container{{Name: mainContainer}}, ps.Containers...)
		i = 0
	}
	c := &ps.Containers[i]
	c.Image = image
	c.ImagePullPolicy = r.opts.ImagePullPolicy
	r.installExecd(ps, c, spec.Entrypoint)
	c.Env = append(c.Env, userEnv(spec.Env)...)
	c.Env = append(c.Env, corev1.EnvVar{Name: execdTokenEnv, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: spec.ID}, Key: keyExecdToken,
	}}})
	addVolumes(ps, c, spec.Volumes)
	if spec.Egress != nil {
		if err := r.addEgress(ps, i, spec); err != nil {
			return nil, err
		}
		c = &ps.Containers[i]
	}
	limits := resourceList(spec.Resources)
	if len(limits) > 0 {
		if c.Resources.Limits == nil {
			c.Resources.Limits = corev1.ResourceList{}
		}
		maps.Copy(c.Resources.Limits, limits)
		// Requests default to the limits; a template's smaller requests stay.
	}
	// resourceRequests: what the scheduler reserves (a GPU's request is
	// its limit, so there is none here).
	if requests := resourceList(runtime.Resources{NanoCPUs: spec.Requests.NanoCPUs, MemoryBytes: spec.Requests.MemoryBytes, DiskBytes: spec.Requests.DiskBytes}); len(requests) > 0 {
		if c.Resources.Requests == nil {
			c.Resources.Requests = corev1.ResourceList{}
		}
		maps.Copy(c.Resources.Requests, requests)
	}

	if spec.Platform != nil {
		if ps.NodeSelector == nil {
			ps.NodeSelector = map[string]string{}
		}
		if spec.Platform.OS != "" {
			ps.NodeSelector[corev1.LabelOSStable] = spec.Platform.OS
		}
		if spec.Platform.Arch != "" {
			ps.NodeSelector[corev1.LabelArchStable] = spec.Platform.Arch
		}
	}
	for _, s := range pullSecrets {
		ps.ImagePullSecrets = append(ps.ImagePullSecrets, corev1.LocalObjectReference{Name: s})
	}
	if r.opts.RuntimeClassName != "" {
		ps.RuntimeClassName = ptr.To(r.opts.RuntimeClassName)
	}
	if r.opts.ServiceAccount != "" {
		ps.ServiceAccountName = r.opts.ServiceAccount
	}
	// A sandbox runs the user's code: no credentials of the cluster, no
	// service links to other workloads.
	ps.AutomountServiceAccountToken = ptr.To(false)
	ps.EnableServiceLinks = ptr.To(false)
	if ps.TerminationGracePeriodSeconds == nil {
		ps.TerminationGracePeriodSeconds = ptr.To(gracePeriod)
	}
	if ps.RestartPolicy == "" {
		ps.RestartPolicy = corev1.RestartPolicyNever
	}
	return t, nil
}

// Extensions whose key has extensionPrefix are copied onto the pod as
// annotations under annExtensionPrefix, as upstream's runtime does (for
// admission webhooks, schedulers and monitoring that read pod annotations).
const (
	extensionPrefix    = "opensandbox.extensions."
	annExtensionPrefix = prefix + "extensions."
)

// extensionAnnotations are the pod annotations of a sandbox's extensions.
func extensionAnnotations(ext map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range ext {
		if rest, ok := strings.CutPrefix(k, extensionPrefix); ok {
			out[annExtensionPrefix+rest] = v
		}
	}
	return out
}

// installExecd makes container c of ps run execd, copied from the execd
// image by an init container into a shared emptyDir, supervising
// entrypoint (execd alone when it is empty). It is ready once execd
// listens: /ping needs the token, so the probe only connects.
func (r *Runtime) installExecd(ps *corev1.PodSpec, c *corev1.Container, entrypoint []string) {
	mount := corev1.VolumeMount{Name: execdVolume, MountPath: execdDir}
	ps.Volumes = append(slices.DeleteFunc(ps.Volumes, func(v corev1.Volume) bool { return v.Name == execdVolume }),
		corev1.Volume{Name: execdVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	ps.InitContainers = append(slices.DeleteFunc(ps.InitContainers, func(c corev1.Container) bool { return c.Name == initContainer }),
		corev1.Container{
			Name: initContainer, Image: r.opts.ExecdImage, ImagePullPolicy: r.opts.ImagePullPolicy,
			Args: []string{"install", execdDir}, VolumeMounts: []corev1.VolumeMount{mount},
			Resources: *r.opts.ExecdInitResources.DeepCopy(),
		})
	c.Command = []string{execdBinary}
	c.Args = nil
	if len(entrypoint) > 0 {
		c.Args = append([]string{"--"}, entrypoint...)
	}
	c.VolumeMounts = append(slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == execdDir }), mount)
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.ContainerPort == sandbox.ExecdPort }) {
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: "execd", ContainerPort: sandbox.ExecdPort, Protocol: corev1.ProtocolTCP})
	}
	c.ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(sandbox.ExecdPort)}},
		PeriodSeconds: 1, FailureThreshold: 1,
	}
}

// userEnv is the user's environment, sorted, without the variables execd
// and the driver own.
func userEnv(env map[string]string) []corev1.EnvVar {
	out := make([]corev1.EnvVar, 0, len(env))
	for k, v := range env {
		if k == execdTokenEnv || k == sandbox.IsolationBootstrapEnv || k == readiness.MarkerEnv {
			continue
		}
		out = append(out, corev1.EnvVar{Name: k, Value: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// resourceList maps limits (or requests) onto container resources.
func resourceList(res runtime.Resources) corev1.ResourceList {
	l := corev1.ResourceList{}
	if res.NanoCPUs > 0 {
		l[corev1.ResourceCPU] = *resource.NewMilliQuantity((res.NanoCPUs+999_999)/1_000_000, resource.DecimalSI)
	}
	if res.MemoryBytes > 0 {
		l[corev1.ResourceMemory] = *resource.NewQuantity(res.MemoryBytes, resource.BinarySI)
	}
	if res.GPUs > 0 {
		l[gpuResource] = *resource.NewQuantity(int64(res.GPUs), resource.DecimalSI)
	}
	if res.DiskBytes > 0 {
		l[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(res.DiskBytes, resource.BinarySI)
	}
	return l
}
