package kubernetes

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

func testRuntime() *Runtime {
	return &Runtime{opts: Options{}.withDefaults(), ns: "sandboxes"}
}

func testSpec() runtime.Spec {
	exp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	return runtime.Spec{
		ID: "sbx-1", Image: "example.org:5000/team/app:1", Entrypoint: []string{"sh", "-c", "echo 'a b'"},
		Env:        map[string]string{"B": "2", "A": "1", execdTokenEnv: "user-set"},
		Metadata:   map[string]string{"team": "x", "example.com/owner": "me", "empty": ""},
		ExpiresAt:  &exp,
		ExecdToken: "secret-token",
		Resources:  runtime.Resources{NanoCPUs: 1_500_000_000, MemoryBytes: 512 << 20, GPUs: 1, DiskBytes: 1 << 30},
		Requests:   runtime.Resources{NanoCPUs: 250_000_000, MemoryBytes: 128 << 20},
		Platform:   &runtime.Platform{OS: "linux", Arch: "arm64"},
		ImageAuth:  &runtime.RegistryAuth{Username: "u", Password: "p"},
	}
}

func TestBatchSandbox(t *testing.T) {
	r := testRuntime()
	r.opts.RuntimeClassName = "gvisor"
	r.opts.ServiceAccount = "sandboxes"
	spec := testSpec()
	b, err := r.batchSandbox(spec, spec.Image, []string{pullSecret(spec.ID)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.Name != spec.ID || b.Namespace != "sandboxes" || *b.Spec.Replicas != 1 || b.Spec.PoolRef != "" {
		t.Errorf("meta %s/%s replicas %d", b.Namespace, b.Name, *b.Spec.Replicas)
	}
	if !b.Spec.ExpireTime.Time.Equal(*spec.ExpiresAt) {
		t.Errorf("expireTime %v", b.Spec.ExpireTime)
	}
	if b.Labels[labelID] != spec.ID || b.Labels["team"] != "x" || b.Labels["example.com/owner"] != "me" {
		t.Errorf("labels %v", b.Labels)
	}
	var entry []string
	if err := json.Unmarshal([]byte(b.Annotations[annEntrypoint]), &entry); err != nil || !slices.Equal(entry, spec.Entrypoint) {
		t.Errorf("entrypoint annotation %q", b.Annotations[annEntrypoint])
	}
	ps := b.Spec.Template.Spec
	if b.Spec.Template.Labels[labelID] != spec.ID {
		t.Errorf("pod labels %v", b.Spec.Template.Labels)
	}
	if len(ps.InitContainers) != 1 || ps.InitContainers[0].Image != DefaultExecdImage ||
		!slices.Equal(ps.InitContainers[0].Args, []string{"install", execdDir}) {
		t.Errorf("init containers %+v", ps.InitContainers)
	}
	c := ps.Containers[0]
	if c.Name != mainContainer || c.Image != spec.Image || !slices.Equal(c.Command, []string{execdBinary}) ||
		!slices.Equal(c.Args, append([]string{"--"}, spec.Entrypoint...)) {
		t.Errorf("main container %s %s %q %q", c.Name, c.Image, c.Command, c.Args)
	}
	var names []string
	for _, e := range c.Env {
		names = append(names, e.Name)
		if e.Name == execdTokenEnv && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != spec.ID || e.Value != "") {
			t.Errorf("token env %+v: want a secretKeyRef", e)
		}
	}
	if !slices.Equal(names, []string{"A", "B", execdTokenEnv}) {
		t.Errorf("env names %q, want the user's sorted, then the token from the secret", names)
	}
	if strings.Contains(mustJSON(t, b), spec.ExecdToken) {
		t.Errorf("the execd token is in the BatchSandbox")
	}
	want := map[corev1.ResourceName]string{corev1.ResourceCPU: "1500m", corev1.ResourceMemory: "512Mi", gpuResource: "1", corev1.ResourceEphemeralStorage: "1Gi"}
	for k, v := range want {
		if q := c.Resources.Limits[k]; q.Cmp(resource.MustParse(v)) != 0 {
			t.Errorf("limit %s = %s, want %s", k, q.String(), v)
		}
	}
	if cpu, mem := c.Resources.Requests[corev1.ResourceCPU], c.Resources.Requests[corev1.ResourceMemory]; cpu.String() != "250m" || mem.String() != "128Mi" || len(c.Resources.Requests) != 2 {
		t.Errorf("requests %v, want cpu 250m and memory 128Mi only (the rest default to the limits)", c.Resources.Requests)
	}
	if ps.NodeSelector[corev1.LabelOSStable] != "linux" || ps.NodeSelector[corev1.LabelArchStable] != "arm64" {
		t.Errorf("node selector %v", ps.NodeSelector)
	}
	if len(ps.ImagePullSecrets) != 1 || ps.ImagePullSecrets[0].Name != "sbx-1-pull" {
		t.Errorf("pull secrets %v", ps.ImagePullSecrets)
	}
	if ps.RuntimeClassName == nil || *ps.RuntimeClassName != "gvisor" || ps.ServiceAccountName != "sandboxes" {
		t.Errorf("runtime class %v, service account %q", ps.RuntimeClassName, ps.ServiceAccountName)
	}
	if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
		t.Errorf("the service account token is mounted into the sandbox")
	}
	if ps.TerminationGracePeriodSeconds == nil || *ps.TerminationGracePeriodSeconds > 5 {
		t.Errorf("grace period %v", ps.TerminationGracePeriodSeconds)
	}

	// What Get reports comes back unchanged.
	b.CreationTimestamp = metav1.Now()
	sb, err := sandboxOf(observed{bsbx: b, secret: r.tokenSecret(spec)})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sb.Entrypoint, spec.Entrypoint) || !equalMaps(sb.Metadata, spec.Metadata) || sb.Image != spec.Image ||
		sb.ExecdToken != spec.ExecdToken || !sb.ExpiresAt.Equal(*spec.ExpiresAt) || *sb.Platform != *spec.Platform || sb.Resources != spec.Resources {
		t.Errorf("sandbox %+v does not round-trip the spec", sb)
	}
}

func TestTemplateMerge(t *testing.T) {
	r := testRuntime()
	r.base = corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"site": "a"}},
		Spec: corev1.PodSpec{
			Tolerations: []corev1.Toleration{{Key: "sandbox"}},
			Containers: []corev1.Container{
				{Name: "sidecar", Image: "side"},
				{Name: mainContainer, Image: "ignored", Env: []corev1.EnvVar{{Name: "SITE", Value: "a"}},
					SecurityContext: &corev1.SecurityContext{RunAsNonRoot: new(bool)}},
			},
		},
	}
	spec := testSpec()
	b, err := r.batchSandbox(spec, spec.Image, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ps := b.Spec.Template.Spec
	if len(ps.Containers) != 2 || ps.Containers[0].Name != "sidecar" || ps.Containers[1].Image != spec.Image ||
		ps.Containers[1].SecurityContext == nil || ps.Containers[1].Env[0].Name != "SITE" {
		t.Errorf("containers %+v", ps.Containers)
	}
	if len(ps.Tolerations) != 1 || b.Spec.Template.Labels["site"] != "a" || b.Spec.Template.Labels[labelID] != spec.ID {
		t.Errorf("template fields lost: %+v %v", ps.Tolerations, b.Spec.Template.Labels)
	}
	if len(r.base.Spec.Containers[1].Env) != 1 {
		t.Errorf("the base template was changed")
	}
}

func TestValidate(t *testing.T) {
	for name, change := range map[string]func(*runtime.Spec){
		"reserved metadata key": func(s *runtime.Spec) { s.Metadata = map[string]string{"opensandbox.io/id": "x"} },
		"reserved subdomain":    func(s *runtime.Spec) { s.Metadata = map[string]string{"a.opensandbox.io/x": "y"} },
		"bad metadata key":      func(s *runtime.Spec) { s.Metadata = map[string]string{"bad key": "y"} },
		"bad metadata value":    func(s *runtime.Spec) { s.Metadata = map[string]string{"k": "not a label value"} },
		"long id":               func(s *runtime.Spec) { s.ID = strings.Repeat("a", 60) },
		"id with capitals":      func(s *runtime.Spec) { s.ID = "Sbx" },
		"no entrypoint":         func(s *runtime.Spec) { s.Entrypoint = nil },
		"no image":              func(s *runtime.Spec) { s.Image = "" },
		"host path":             func(s *runtime.Spec) { s.Volumes = []runtime.Volume{{Name: "h", HostPath: "/x", MountPath: "/x"}} },
		"all gpus":              func(s *runtime.Spec) { s.Resources.GPUs = -1 },
	} {
		spec := testSpec()
		change(&spec)
		err := validate(spec)
		if !errors.Is(err, runtime.ErrInvalid) && !errors.Is(err, runtime.ErrNotSupported) {
			t.Errorf("%s: %v, want ErrInvalid or ErrNotSupported", name, err)
		}
	}
	err := validate(func() runtime.Spec { s := testSpec(); s.Metadata = map[string]string{"bad key": "y"}; return s }())
	if err == nil || !strings.Contains(err.Error(), "bad key") {
		t.Errorf("error %v does not name the key", err)
	}
	if err := validate(testSpec()); err != nil {
		t.Errorf("valid spec: %v", err)
	}
}

func TestRegistrySecret(t *testing.T) {
	r := testRuntime()
	spec := testSpec()
	s, err := r.registrySecret(spec)
	if err != nil {
		t.Fatal(err)
	}
	if s.Type != corev1.SecretTypeDockerConfigJson || s.Labels[labelID] != spec.ID {
		t.Errorf("secret %+v", s.ObjectMeta)
	}
	var cfg struct {
		Auths map[string]map[string]string `json:"auths"`
	}
	if err := json.Unmarshal(s.Data[corev1.DockerConfigJsonKey], &cfg); err != nil {
		t.Fatal(err)
	}
	if a := cfg.Auths["example.org:5000"]; a["username"] != "u" || a["password"] != "p" || a["auth"] != "dTpw" {
		t.Errorf("auths %v", cfg.Auths)
	}
	for ref, host := range map[string]string{"debian:12": "https://index.docker.io/v1/", "library/x": "https://index.docker.io/v1/", "localhost/x": "localhost", "a.b/c/d:1": "a.b"} {
		if got := registryHost(ref); got != host {
			t.Errorf("registryHost(%q) = %q, want %q", ref, got, host)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestVolumes(t *testing.T) {
	r := testRuntime()
	spec := testSpec()
	spec.Volumes = []runtime.Volume{
		{Name: "a", ClaimName: "c1", MountPath: "/a"},
		{Name: "b", ClaimName: "c1", MountPath: "/b", SubPath: "s", ReadOnly: true},
		{Name: "c", ClaimName: "c2", MountPath: "/c", ReadOnly: true},
	}
	b, err := r.batchSandbox(spec, spec.Image, nil, []string{"c2"})
	if err != nil {
		t.Fatal(err)
	}
	ps := b.Spec.Template.Spec
	var claims []string
	for _, v := range ps.Volumes {
		if pvc := v.PersistentVolumeClaim; pvc != nil {
			claims = append(claims, fmt.Sprintf("%s=%s ro=%v", v.Name, pvc.ClaimName, pvc.ReadOnly))
		}
	}
	if want := []string{"vol-0=c1 ro=false", "vol-1=c2 ro=true"}; !slices.Equal(claims, want) {
		t.Errorf("pod volumes %q, want %q (one per claim)", claims, want)
	}
	var mounts []string
	for _, m := range ps.Containers[0].VolumeMounts {
		mounts = append(mounts, fmt.Sprintf("%s:%s:%s:%v", m.Name, m.MountPath, m.SubPath, m.ReadOnly))
	}
	if want := []string{"opensandbox-bin:/opt/opensandbox::false", "vol-0:/a::false", "vol-0:/b:s:true", "vol-1:/c::true"}; !slices.Equal(mounts, want) {
		t.Errorf("mounts %q, want %q", mounts, want)
	}
	if b.Annotations[annManagedVolumes] != "c2" {
		t.Errorf("managed volumes annotation %q", b.Annotations[annManagedVolumes])
	}
	pvc, err := r.claimFor("sbx", runtime.Volume{ClaimName: "c3", DeleteOnTermination: true, StorageClass: "fast", Storage: "5Gi", AccessModes: "ReadWriteMany"})
	if err != nil {
		t.Fatal(err)
	}
	if pvc.Labels[labelID] != "sbx" || pvc.Labels[labelCreatedBy] != "sbx" || *pvc.Spec.StorageClassName != "fast" ||
		pvc.Spec.Resources.Requests.Storage().String() != "5Gi" || pvc.Spec.AccessModes[0] != corev1.ReadWriteMany {
		t.Errorf("claim %+v", pvc)
	}
	for _, bad := range []runtime.Volume{{ClaimName: "x", MountPath: "/x", Storage: "lots"}, {ClaimName: "x", MountPath: "/x", AccessModes: "Sometimes"}} {
		s := testSpec()
		s.Volumes = []runtime.Volume{bad}
		if err := validate(s); !errors.Is(err, runtime.ErrInvalid) {
			t.Errorf("volume %+v: %v, want ErrInvalid", bad, err)
		}
	}
}

func TestPooledBatchSandbox(t *testing.T) {
	r := testRuntime()
	spec := testSpec()
	spec.PoolRef = "warm"
	b, err := r.batchSandbox(spec, spec.Image, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.Spec.PoolRef != "warm" || b.Spec.Template != nil || *b.Spec.Replicas != 1 || b.Spec.ExpireTime == nil {
		t.Errorf("pooled BatchSandbox spec %+v", b.Spec)
	}
	spec.Volumes = []runtime.Volume{{Name: "v", ClaimName: "c", MountPath: "/v"}}
	if err := validate(spec); !errors.Is(err, runtime.ErrNotSupported) {
		t.Errorf("pooled with volumes: %v, want ErrNotSupported", err)
	}
	spec.Volumes, spec.PoolRef = nil, "Not_A_Name"
	if err := validate(spec); !errors.Is(err, runtime.ErrInvalid) {
		t.Errorf("bad poolRef: %v, want ErrInvalid", err)
	}

	// The pool decides image and entrypoint; what would change the pod is refused.
	minimal := runtime.Spec{ID: "sbx-2", PoolRef: "warm", ExecdToken: "t", Env: map[string]string{"A": "1"}}
	if err := validate(minimal); err != nil {
		t.Errorf("pooled spec without image or entrypoint: %v", err)
	}
	for what, change := range map[string]func(*runtime.Spec){
		"snapshot":  func(s *runtime.Spec) { s.SnapshotID = "snap" },
		"platform":  func(s *runtime.Spec) { s.Platform = &runtime.Platform{OS: "linux", Arch: "amd64"} },
		"auth":      func(s *runtime.Spec) { s.ImageAuth = &runtime.RegistryAuth{Username: "u"} },
		"isolation": func(s *runtime.Spec) { s.IsolatedExecution = true },
	} {
		s := minimal
		change(&s)
		if err := validate(s); !errors.Is(err, runtime.ErrNotSupported) {
			t.Errorf("pooled with %s: %v, want ErrNotSupported", what, err)
		}
	}
	b, err = r.batchSandbox(minimal, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Annotations[annEntrypoint]; ok || b.Spec.Template != nil {
		t.Errorf("pooled BatchSandbox without entrypoint: annotations %v, template %v", b.Annotations, b.Spec.Template)
	}
	sb, err := sandboxOf(observed{bsbx: b})
	if err != nil || sb.Entrypoint == nil || len(sb.Entrypoint) != 0 {
		t.Errorf("Get of a pooled sandbox: entrypoint %#v, %v; want empty, not null", sb.Entrypoint, err)
	}
}

// Extensions prefixed opensandbox.extensions. become pod annotations
// under opensandbox.io/extensions.; others are not the driver's.
func TestExtensionAnnotations(t *testing.T) {
	r := testRuntime()
	spec := testSpec()
	spec.Extensions = map[string]string{"opensandbox.extensions.cost-center": "ml-42", "poolRef": "x", "other": "y"}
	b, err := r.batchSandbox(spec, spec.Image, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ann := b.Spec.Template.Annotations
	if ann["opensandbox.io/extensions.cost-center"] != "ml-42" || len(ann) != 1 {
		t.Errorf("pod annotations %v, want only opensandbox.io/extensions.cost-center", ann)
	}
	spec.Extensions = map[string]string{"opensandbox.extensions.bad key": "v"}
	if err := validate(spec); !errors.Is(err, runtime.ErrInvalid) || !strings.Contains(err.Error(), "bad key") {
		t.Errorf("an extension that cannot name an annotation: %v, want ErrInvalid naming it", err)
	}
}

func TestPoolTemplate(t *testing.T) {
	r := testRuntime()
	r.opts.RuntimeClassName = "gvisor"
	tmpl := func(c corev1.Container) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{c, {Name: "side", Image: "side:1"}}}}
	}
	t1 := tmpl(corev1.Container{Name: "app", Image: "base:1", Command: []string{"sleep"}, Args: []string{"infinity"},
		Env: []corev1.EnvVar{{Name: "KEEP", Value: "1"}, {Name: execdTokenEnv, Value: "no"}}})
	if err := r.poolTemplate(&t1); err != nil {
		t.Fatal(err)
	}
	c := t1.Spec.Containers[0]
	if !slices.Equal(c.Command, []string{execdBinary}) || !slices.Equal(c.Args, []string{"--", "sleep", "infinity"}) {
		t.Errorf("pool container runs %q %q, want execd supervising sleep infinity", c.Command, c.Args)
	}
	var claim *corev1.EnvVar
	for i, e := range c.Env {
		switch e.Name {
		case claimEnv:
			claim = &c.Env[i]
		case execdTokenEnv:
			t.Errorf("a pool container keeps %s", execdTokenEnv)
		}
	}
	if claim == nil || claim.ValueFrom == nil || claim.ValueFrom.SecretKeyRef.Name != ClaimSecret || claim.ValueFrom.SecretKeyRef.Key != keyClaim {
		t.Errorf("claim token env = %+v, want from Secret %s", claim, ClaimSecret)
	}
	if len(t1.Spec.InitContainers) != 1 || t1.Spec.InitContainers[0].Name != initContainer || t1.Labels[labelExecd] != execdClaim ||
		c.ReadinessProbe == nil || *t1.Spec.AutomountServiceAccountToken || *t1.Spec.RuntimeClassName != "gvisor" {
		t.Errorf("pool template not prepared: %+v", t1)
	}
	if sc := t1.Spec.Containers[1]; sc.Command != nil || len(sc.Env) != 0 {
		t.Errorf("the second container changed: %+v", sc)
	}
	// Idempotent: a template read back from a pool stays as it was.
	again := *t1.DeepCopy()
	if err := r.poolTemplate(&again); err != nil {
		t.Fatal(err)
	}
	if mustJSON(t, again) != mustJSON(t, t1) {
		t.Errorf("preparing twice changed the template:\n%s\n%s", mustJSON(t, t1), mustJSON(t, again))
	}

	bare := tmpl(corev1.Container{Name: "app", Image: "base:1"})
	if err := r.poolTemplate(&bare); err != nil || bare.Spec.Containers[0].Args != nil {
		t.Errorf("a container without a command: args %q, %v; want execd alone", bare.Spec.Containers[0].Args, err)
	}
	argsOnly := tmpl(corev1.Container{Name: "app", Image: "base:1", Args: []string{"x"}})
	if err := r.poolTemplate(&argsOnly); !errors.Is(err, runtime.ErrInvalid) || !strings.Contains(err.Error(), "containers[0]") {
		t.Errorf("args without a command: %v, want ErrInvalid naming the container", err)
	}
}
