package serverconfig

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// loadKube loads body with runtime.type = "kubernetes"; files are written
// into home first (name relative to home → content).
func loadKube(t *testing.T, body string, files map[string]string) (Config, []string, error) {
	t.Helper()
	env, home := testEnv(t, nil)
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(home, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return Load(writeConfig(t, home, "[runtime]\ntype = \"kubernetes\"\n"+body), env)
}

// upstreamTemplate is shaped like upstream's example template: no
// apiVersion or kind, pod settings under spec.template.
const upstreamTemplate = `# sandboxes start from this
metadata:
  labels:
    team: ml
spec:
  replicas: 1
  template:
    spec:
      restartPolicy: Never
      tolerations:
        - operator: "Exists"
`

func TestLoadKubernetesDefaults(t *testing.T) {
	cfg, warnings, err := loadKube(t, "", nil)
	if err != nil {
		t.Fatalf("Load(runtime.type = kubernetes): %v", err)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings = %q, want none", warnings)
	}
	k := cfg.Kubernetes
	checks := []struct {
		name      string
		got, want any
	}{
		{"runtime", cfg.Runtime.Type, "kubernetes"},
		{"execd image", cfg.Runtime.ExecdImage, "opensandbox/execd:latest"},
		{"kubeconfig", k.KubeconfigPath, ""},
		{"namespace", k.Namespace, "default"},
		{"service account", k.ServiceAccount, ""},
		{"provider", k.WorkloadProvider, "batchsandbox"},
		{"template", k.BatchSandboxTemplateFile, ""},
		{"pull policy", k.ImagePullPolicy, "IfNotPresent"},
		{"create timeout", k.CreateTimeout(), time.Minute},
		{"poll interval", k.SandboxCreatePollIntervalSeconds, 1.0},
		{"snapshot timeout", k.SnapshotTimeout(), 15 * time.Minute},
		{"informer", k.InformerEnabled, true},
		{"resync", k.InformerResync(), 5 * time.Minute},
		{"watch timeout", k.InformerWatchTimeout(), time.Minute},
		{"read qps", k.ReadQPS, 0.0},
		{"read burst", k.ReadBurst, 0},
		{"write qps", k.WriteQPS, 0.0},
		{"write burst", k.WriteBurst, 0},
		{"init resources", k.ExecdInitResources, ExecdInitResources{}},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("default %s = %v, want %v", c.name, c.got, c.want)
		}
	}
	req, err := k.ExecdInitResources.Requirements()
	if err != nil || req.Limits != nil || req.Requests != nil {
		t.Errorf("Requirements() of no resources = %+v, %v; want empty, nil", req, err)
	}
}

func TestLoadKubernetesEveryKey(t *testing.T) {
	body := `
execd_image = "registry.local/execd:v2"
[kubernetes]
kubeconfig_path = "~/kubeconfig"
namespace = "sandboxes"
service_account = "sandbox-runner"
workload_provider = "BatchSandbox"
batchsandbox_template_file = "~/template.yaml"
image_pull_policy = "always"
sandbox_create_timeout_seconds = 120
snapshot_create_timeout_seconds = 1800
informer_enabled = true
informer_resync_seconds = 600
informer_watch_timeout_seconds = 30
read_qps = 50
read_burst = 100
write_qps = 2.5
write_burst = 0
[kubernetes.execd_init_resources]
limits = { cpu = "100m", memory = "128Mi" }
requests = { cpu = "50m", memory = "64Mi", ephemeral-storage = "10Mi" }
[secure_runtime]
type = "gvisor"
k8s_runtime_class = "gvisor"
`
	// execd_image goes into [runtime], which loadKube's file opens with.
	cfg, warnings, err := loadKube(t, body, map[string]string{"kubeconfig": "apiVersion: v1\nkind: Config\n", "template.yaml": upstreamTemplate})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings = %q, want none", warnings)
	}
	home := filepath.Dir(cfg.Path)
	want := Kubernetes{
		KubeconfigPath:                   filepath.Join(home, "kubeconfig"),
		Namespace:                        "sandboxes",
		ServiceAccount:                   "sandbox-runner",
		WorkloadProvider:                 "batchsandbox",
		BatchSandboxTemplateFile:         filepath.Join(home, "template.yaml"),
		ImagePullPolicy:                  "Always",
		SandboxCreateTimeoutSeconds:      120,
		SandboxCreatePollIntervalSeconds: 1,
		SnapshotCreateTimeoutSeconds:     1800,
		InformerEnabled:                  true,
		InformerResyncSeconds:            600,
		InformerWatchTimeoutSeconds:      30,
		ReadQPS:                          50,
		ReadBurst:                        100,
		WriteQPS:                         2.5,
		WriteBurst:                       3, // qps rounded up
		ExecdInitResources: ExecdInitResources{
			Limits:   map[string]string{"cpu": "100m", "memory": "128Mi"},
			Requests: map[string]string{"cpu": "50m", "memory": "64Mi", "ephemeral-storage": "10Mi"},
		},
	}
	if !reflect.DeepEqual(cfg.Kubernetes, want) {
		t.Errorf("Load(every [kubernetes] key) =\n%+v\nwant\n%+v", cfg.Kubernetes, want)
	}
	if cfg.Runtime.ExecdImage != "registry.local/execd:v2" {
		t.Errorf("runtime.execd_image = %q, want registry.local/execd:v2", cfg.Runtime.ExecdImage)
	}
	req, err := cfg.Kubernetes.ExecdInitResources.Requirements()
	if err != nil {
		t.Fatalf("Requirements(): %v", err)
	}
	wantReq := corev1.ResourceRequirements{
		Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi"),
			corev1.ResourceEphemeralStorage: resource.MustParse("10Mi")},
	}
	for _, l := range []struct {
		name      string
		got, want corev1.ResourceList
	}{{"limits", req.Limits, wantReq.Limits}, {"requests", req.Requests, wantReq.Requests}} {
		if len(l.got) != len(l.want) {
			t.Errorf("Requirements().%s = %v, want %v", l.name, l.got, l.want)
		}
		for n, q := range l.want {
			if g, ok := l.got[n]; !ok || g.Cmp(q) != 0 {
				t.Errorf("Requirements().%s[%s] = %v, want %v", l.name, n, l.got[n], q)
			}
		}
	}
}

func TestLoadKubernetesBursts(t *testing.T) {
	tests := []struct {
		body      string
		wantBurst int
	}{
		{"read_qps = 0.2\n", 1},
		{"read_qps = 10\n", 10},
		{"read_qps = 10.1\n", 11},
		{"read_qps = 10\nread_burst = 4\n", 4},
		{"read_qps = 0\n", 0},
	}
	for _, tt := range tests {
		cfg, _, err := loadKube(t, "[kubernetes]\n"+tt.body, nil)
		if err != nil {
			t.Errorf("Load(%q): %v", tt.body, err)
			continue
		}
		if cfg.Kubernetes.ReadBurst != tt.wantBurst {
			t.Errorf("Load(%q) read_burst = %d, want %d", tt.body, cfg.Kubernetes.ReadBurst, tt.wantBurst)
		}
	}
}

func TestLoadKubernetesInvalid(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		files map[string]string
		want  []string
	}{
		{"kubeconfig missing", "[kubernetes]\nkubeconfig_path = \"/nonexistent/kubeconfig\"\n", nil, []string{`kubernetes.kubeconfig_path = "/nonexistent/kubeconfig"`}},
		{"kubeconfig directory", "[kubernetes]\nkubeconfig_path = \"/\"\n", nil, []string{`kubernetes.kubeconfig_path = "/"`, "directory"}},
		{"namespace upper case", "[kubernetes]\nnamespace = \"Sandboxes\"\n", nil, []string{`kubernetes.namespace = "Sandboxes"`}},
		{"namespace empty", "[kubernetes]\nnamespace = \"\"\n", nil, []string{`kubernetes.namespace = ""`}},
		{"namespace with dot", "[kubernetes]\nnamespace = \"a.b\"\n", nil, []string{`kubernetes.namespace = "a.b"`}},
		{"service account", "[kubernetes]\nservice_account = \"Runner_1\"\n", nil, []string{`kubernetes.service_account = "Runner_1"`}},
		{"agent-sandbox", "[kubernetes]\nworkload_provider = \"agent-sandbox\"\n", nil, []string{`kubernetes.workload_provider = "agent-sandbox"`, "not supported", `"batchsandbox"`}},
		{"provider unknown", "[kubernetes]\nworkload_provider = \"deployment\"\n", nil, []string{`kubernetes.workload_provider = "deployment"`}},
		{"template missing", "[kubernetes]\nbatchsandbox_template_file = \"/nonexistent/t.yaml\"\n", nil, []string{`kubernetes.batchsandbox_template_file = "/nonexistent/t.yaml"`, "no such file"}},
		{"template not yaml", "[kubernetes]\nbatchsandbox_template_file = \"~/t.yaml\"\n", map[string]string{"t.yaml": "spec: [\n"}, []string{"kubernetes.batchsandbox_template_file", "not a BatchSandbox"}},
		{"pull policy", "[kubernetes]\nimage_pull_policy = \"Sometimes\"\n", nil, []string{`kubernetes.image_pull_policy = "Sometimes"`}},
		{"create timeout", "[kubernetes]\nsandbox_create_timeout_seconds = 0\n", nil, []string{"kubernetes.sandbox_create_timeout_seconds = 0"}},
		{"poll interval", "[kubernetes]\nsandbox_create_poll_interval_seconds = 0.0\n", nil, []string{"kubernetes.sandbox_create_poll_interval_seconds = 0"}},
		{"poll interval nan", "[kubernetes]\nsandbox_create_poll_interval_seconds = nan\n", nil, []string{"kubernetes.sandbox_create_poll_interval_seconds = NaN"}},
		{"snapshot timeout", "[kubernetes]\nsnapshot_create_timeout_seconds = -1\n", nil, []string{"kubernetes.snapshot_create_timeout_seconds = -1"}},
		{"informer off", "[kubernetes]\ninformer_enabled = false\n", nil, []string{"kubernetes.informer_enabled = false", "informer cache"}},
		{"resync", "[kubernetes]\ninformer_resync_seconds = 0\n", nil, []string{"kubernetes.informer_resync_seconds = 0"}},
		{"watch timeout", "[kubernetes]\ninformer_watch_timeout_seconds = 0\n", nil, []string{"kubernetes.informer_watch_timeout_seconds = 0"}},
		{"read qps negative", "[kubernetes]\nread_qps = -1.0\n", nil, []string{"kubernetes.read_qps = -1"}},
		{"write qps infinite", "[kubernetes]\nwrite_qps = inf\n", nil, []string{"kubernetes.write_qps = +Inf"}},
		{"read burst negative", "[kubernetes]\nread_burst = -1\n", nil, []string{"kubernetes.read_burst = -1"}},
		{"write burst negative", "[kubernetes]\nwrite_qps = 5.0\nwrite_burst = -2\n", nil, []string{"kubernetes.write_burst = -2"}},
		{"init quantity", "[kubernetes.execd_init_resources]\nlimits = { cpu = \"lots\" }\n", nil, []string{`kubernetes.execd_init_resources.limits.cpu = "lots"`}},
		{"init quantity negative", "[kubernetes.execd_init_resources]\nrequests = { memory = \"-1Mi\" }\n", nil, []string{`kubernetes.execd_init_resources.requests.memory = "-1Mi"`}},
		{"init resource name", "[kubernetes.execd_init_resources]\nlimits = { \"my cpu\" = \"1\" }\n", nil, []string{`kubernetes.execd_init_resources.limits = "my cpu"`}},
		{"init request above limit", "[kubernetes.execd_init_resources]\nlimits = { memory = \"64Mi\" }\nrequests = { memory = \"128Mi\" }\n", nil, []string{`kubernetes.execd_init_resources.requests.memory = "128Mi"`, `"64Mi"`}},
		{"unknown key", "[kubernetes]\nnamspace = \"x\"\n", nil, []string{`unknown key "namspace" in [kubernetes]`}},
		{"wrong type", "[kubernetes]\nread_burst = \"ten\"\n", nil, []string{"read_burst"}},
		{"execd image empty", "execd_image = \"\"\n", nil, []string{`runtime.execd_image = ""`}},
		{"gvisor without runtime class", "[secure_runtime]\ntype = \"gvisor\"\ndocker_runtime = \"runsc\"\n", nil, []string{`secure_runtime.type = "gvisor" needs secure_runtime.k8s_runtime_class`}},
		{"firecracker without runtime class", "[secure_runtime]\ntype = \"firecracker\"\n", nil, []string{`secure_runtime.type = "firecracker" needs secure_runtime.k8s_runtime_class`}},
		{"bad runtime class", "[secure_runtime]\ntype = \"kata\"\nk8s_runtime_class = \"Kata QEMU\"\n", nil, []string{`secure_runtime.k8s_runtime_class = "Kata QEMU"`}},
		{"ingress gateway", "[ingress]\nmode = \"gateway\"\n", nil, []string{`ingress.mode = "gateway"`, "not supported yet"}},
		{"docker table", "[docker]\npids_limit = 10\n", nil, []string{`[docker] is only valid with runtime.type = "docker"`}},
		{"empty docker table", "[docker]\n", nil, []string{`[docker] is only valid with runtime.type = "docker"`}},
		{"agent_sandbox table", "[agent_sandbox]\nshutdown_policy = \"Delete\"\n", nil, []string{"[agent_sandbox] is refused", "agent-sandbox"}},
		{"ingress gateway table", "[ingress.gateway]\naddress = \"gw\"\n", nil, []string{"[ingress.gateway] is refused", "not supported yet"}},
		{"secure access table", "[ingress.secure_access]\nactive_key = \"k\"\n", nil, []string{"[ingress.secure_access] is refused"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A body starting with a bare key adds it to [runtime], the
			// table loadKube's file opens with.
			_, _, err := loadKube(t, tt.body, tt.files)
			if err == nil {
				t.Fatalf("Load(%q) succeeded, want an error naming %q", tt.body, tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Load(%q) error = %q, want it to contain %q", tt.body, err, w)
				}
			}
		})
	}
}

func TestLoadKubernetesAccepted(t *testing.T) {
	tests := []struct{ name, body string }{
		{"pull policy Never", "[kubernetes]\nimage_pull_policy = \"Never\"\n"},
		{"pull policy IfNotPresent any case", "[kubernetes]\nimage_pull_policy = \"ifnotpresent\"\n"},
		{"provider empty", "[kubernetes]\nworkload_provider = \"\"\n"},
		{"kata with runtime class", "[secure_runtime]\ntype = \"kata\"\nk8s_runtime_class = \"kata-qemu\"\n"},
		{"firecracker", "[secure_runtime]\ntype = \"firecracker\"\nk8s_runtime_class = \"kata-fc\"\n"},
		{"docker_runtime unused", "[secure_runtime]\ntype = \"gvisor\"\ndocker_runtime = \"runsc\"\nk8s_runtime_class = \"gvisor\"\n"},
		{"init zero quantity", "[kubernetes.execd_init_resources]\nrequests = { cpu = \"0\" }\nlimits = { cpu = \"0.1\" }\n"},
		{"extended resource name", "[kubernetes.execd_init_resources]\nlimits = { \"example.com/foo\" = \"1\" }\n"},
		{"storage and egress apply", "[storage]\nvolume_default_size = \"5Gi\"\n[egress]\nmode = \"dns\"\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, warnings, err := loadKube(t, tt.body, nil); err != nil {
				t.Errorf("Load(%q): %v", tt.body, err)
			} else if len(warnings) != 0 {
				t.Errorf("Load(%q) warnings = %q, want none", tt.body, warnings)
			}
		})
	}
}

func TestLoadKubernetesWarnings(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"poll interval", "[kubernetes]\nsandbox_create_poll_interval_seconds = 0.5\n", "kubernetes.sandbox_create_poll_interval_seconds is ignored"},
		{"execd path", "execd_path = \"/usr/local/bin/execd\"\n", "runtime.execd_path is ignored"},
		{"burst without qps", "[kubernetes]\nwrite_burst = 20\n", "kubernetes.write_burst = 20 has no effect"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, warnings, err := loadKube(t, tt.body, nil)
			if err != nil {
				t.Fatalf("Load(%q): %v", tt.body, err)
			}
			if !strings.Contains(strings.Join(warnings, "\n"), tt.want) {
				t.Errorf("Load(%q) warnings = %q, want one containing %q", tt.body, warnings, tt.want)
			}
		})
	}
}

// TestLoadDockerRefusesKubernetesKeys: what only applies to Kubernetes
// stays refused on Docker, the values valid or not.
func TestLoadDockerRefusesKubernetesKeys(t *testing.T) {
	for _, body := range []string{
		"[kubernetes]\nnamespace = \"default\"\n",
		"[kubernetes]\n",
		"[kubernetes.execd_init_resources]\nlimits = { cpu = \"1\" }\n",
	} {
		_, _, err := loadString(t, body, nil)
		if err == nil || !strings.Contains(err.Error(), `[kubernetes] is only valid with runtime.type = "kubernetes"`) {
			t.Errorf("Load(docker, %q) error = %v, want [kubernetes] refused", body, err)
		}
	}
	_, warnings, err := loadString(t, "[runtime]\ntype = \"docker\"\nexecd_image = \"opensandbox/execd:v1\"\n", nil)
	if err != nil || !strings.Contains(strings.Join(warnings, "\n"), "runtime.execd_image is ignored") {
		t.Errorf("Load(docker, execd_image) = %q, %v; want a warning that it is ignored", warnings, err)
	}
}

func TestLoadBatchSandboxTemplate(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bs, err := LoadBatchSandboxTemplate(write("upstream.yaml", upstreamTemplate))
	if err != nil {
		t.Fatalf("LoadBatchSandboxTemplate(upstream's shape): %v", err)
	}
	if bs.Labels["team"] != "ml" || bs.Spec.Template == nil || bs.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever ||
		len(bs.Spec.Template.Spec.Tolerations) != 1 || bs.Spec.Template.Spec.Tolerations[0].Operator != corev1.TolerationOpExists {
		t.Errorf("LoadBatchSandboxTemplate(upstream's shape) = %+v, want its labels, restart policy and toleration", bs)
	}
	typed := "apiVersion: sandbox.opensandbox.io/v1alpha1\nkind: BatchSandbox\nspec:\n  template:\n    spec:\n      nodeSelector:\n        pool: sandboxes\n"
	if bs, err := LoadBatchSandboxTemplate(write("typed.yaml", typed)); err != nil || bs.Spec.Template.Spec.NodeSelector["pool"] != "sandboxes" {
		t.Errorf("LoadBatchSandboxTemplate(with apiVersion and kind) = %+v, %v; want its node selector", bs, err)
	}
	if _, err := LoadBatchSandboxTemplate(write("json.json", `{"spec":{"replicas":1}}`)); err != nil {
		t.Errorf("LoadBatchSandboxTemplate(JSON): %v", err)
	}

	bad := []struct{ name, content, want string }{
		{"empty", "\n  \n", "empty"},
		{"not yaml", "spec: [\n", "not a BatchSandbox"},
		{"unknown field", "spec:\n  replica: 1\n", "replica"},
		{"pod field misplaced", "spec:\n  template:\n    restartPolicy: Never\n", "restartPolicy"},
		{"wrong kind", "kind: Pool\n", `kind "Pool"`},
		{"wrong version", "apiVersion: sandbox.opensandbox.io/v2\nkind: BatchSandbox\n", `apiVersion "sandbox.opensandbox.io/v2"`},
		{"replicas", "spec:\n  replicas: 3\n", "spec.replicas = 3"},
		{"name", "metadata:\n  name: fixed\n", "metadata.name"},
		{"namespace", "metadata:\n  namespace: other\n", "metadata.namespace"},
		{"pool ref", "spec:\n  poolRef: warm\n", "spec.poolRef"},
		{"expire time", "spec:\n  expireTime: \"2030-01-01T00:00:00Z\"\n", "spec.expireTime"},
	}
	for _, b := range bad {
		_, err := LoadBatchSandboxTemplate(write(b.name+".yaml", b.content))
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("LoadBatchSandboxTemplate(%s) = %v, want an error containing %q", b.name, err, b.want)
		}
	}
	if _, err := LoadBatchSandboxTemplate(filepath.Join(dir, "missing.yaml")); !os.IsNotExist(err) {
		t.Errorf("LoadBatchSandboxTemplate(missing) = %v, want not exist", err)
	}
}
