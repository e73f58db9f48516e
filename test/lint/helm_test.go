package lint

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/BurntSushi/toml"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/opensandbox-go/opensandbox/internal/serverconfig"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

const chartDir = "deploy/helm/opensandbox"

var (
	helmcheckOnce sync.Once
	helmcheckPath string
	helmcheckErr  error
)

// helmcheck builds tools/helmcheck (Helm as a library, a module of its
// own) into bin/ once per test binary and returns its path.
func helmcheck(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds tools/helmcheck (Helm)")
	}
	root := repoRoot(t)
	helmcheckOnce.Do(func() {
		// bin/helmcheck, as make helmcheck builds it (go's cache makes a
		// rebuild quick; a temporary file would be left behind).
		helmcheckPath = filepath.Join(root, "bin", "helmcheck")
		cmd := exec.Command("go", "build", "-buildvcs=false", "-o", helmcheckPath, ".")
		cmd.Dir = filepath.Join(root, "tools/helmcheck")
		if out, err := cmd.CombinedOutput(); err != nil {
			helmcheckErr = fmt.Errorf("go build tools/helmcheck: %w\n%s", err, out)
		}
	})
	if helmcheckErr != nil {
		t.Fatal(helmcheckErr)
	}
	return helmcheckPath
}

// runHelmcheck runs one helmcheck command on the chart and returns its
// standard output, or its error with both outputs.
func runHelmcheck(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin := helmcheck(t)
	cmd := exec.Command(bin, append(args, filepath.Join(repoRoot(t), chartDir))...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helmcheck %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// TestHelmChartGeneratedCopies: the chart's CRDs and the controller's
// ClusterRole rules are copies (make generate) of the controller-gen
// output in deploy/, which TestGeneratedCRDsUpToDate keeps fresh.
func TestHelmChartGeneratedCopies(t *testing.T) {
	root := repoRoot(t)
	compareDir(t, filepath.Join(root, "deploy/crds"), root, chartDir+"/crds")
	compareFile(t, filepath.Join(root, "deploy/controller/rbac/role.yaml"), filepath.Join(root, chartDir, "files/controller-clusterrole.yaml"))
}

// valueSets are the values the chart is linted and rendered with.
var valueSets = map[string][]string{
	"defaults":        nil,
	"existing secret": {"server.existingSecret=my-key", "server.existingSecretKey=token"},
	"api key":         {"server.apiKey=s3cret-key"},
	"custom namespace": {
		"server.kubernetes.namespace=sandboxes", "server.kubernetes.serviceAccount=sandbox-runner",
		"server.kubernetes.sandboxCreateTimeoutSeconds=120", "server.kubernetes.readQPS=2.5",
		"server.kubernetes.execdInitResources.requests.cpu=50m", "server.kubernetes.execdInitResources.requests.memory=32Mi",
		"server.kubernetes.execdInitResources.limits.ephemeral-storage=1Gi",
	},
	"replicas": {"controller.replicas=3", "server.replicas=2", "controller.watchNamespaces={a,b}"},
	"snapshots": {
		"controller.snapshot.registry=localhost:5000/snapshots", "controller.snapshot.registryInsecure=true",
		"controller.snapshot.pushSecret=push", "controller.image.tag=v1", "controller.image.pullPolicy=Always",
	},
}

func setArgs(sets []string) []string {
	var args []string
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	return args
}

// TestHelmLint is `helm lint --strict` with every value set.
func TestHelmLint(t *testing.T) {
	for name, sets := range valueSets {
		t.Run(name, func(t *testing.T) {
			out, err := runHelmcheck(t, append([]string{"lint"}, setArgs(sets)...)...)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "no warning") {
				t.Errorf("lint output:\n%s", out)
			}
		})
	}
}

// rendered is one `helm template` output, decoded.
type rendered struct {
	objs []runtime.Object
	crds []*unstructured.Unstructured
}

var decoder = func() runtime.Decoder {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := sandboxv1alpha1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
}()

// decodeManifests decodes a YAML stream into typed objects with the
// client-go and sandbox schemes (strictly: an unknown or duplicate field
// fails); CRDs, which neither scheme has, are kept unstructured.
func decodeManifests(t *testing.T, manifest string) rendered {
	t.Helper()
	var r rendered
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("split manifests: %v", err)
		}
		js, err := utilyaml.ToJSON(doc)
		if err != nil {
			t.Fatalf("YAML to JSON: %v\n%s", err, doc)
		}
		if s := strings.TrimSpace(string(js)); s == "null" || s == "" {
			continue // comments only
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			t.Fatalf("not a Kubernetes object: %v\n%s", err, doc)
		}
		if u.GetKind() == "CustomResourceDefinition" {
			r.crds = append(r.crds, u)
			continue
		}
		obj, _, err := decoder.Decode(js, nil, nil)
		if err != nil {
			t.Fatalf("decode %s %s: %v\n%s", u.GetKind(), u.GetName(), err, doc)
		}
		r.objs = append(r.objs, obj)
	}
	return r
}

func template(t *testing.T, ns string, sets []string) rendered {
	t.Helper()
	out, err := runHelmcheck(t, append([]string{"template", "--name", "osb", "--namespace", ns}, setArgs(sets)...)...)
	if err != nil {
		t.Fatal(err)
	}
	return decodeManifests(t, out)
}

func find[T runtime.Object](t *testing.T, r rendered, name string) T {
	t.Helper()
	var zero T
	for _, o := range r.objs {
		if typed, ok := o.(T); ok && o.(interface{ GetName() string }).GetName() == name {
			return typed
		}
	}
	t.Fatalf("no %T named %s rendered", zero, name)
	return zero
}

func count[T runtime.Object](r rendered) int {
	n := 0
	for _, o := range r.objs {
		if _, ok := o.(T); ok {
			n++
		}
	}
	return n
}

// ruleSet is a set of rules as "group/resource" → sorted verbs, so that
// two rule lists compare whatever their grouping.
func ruleSet(rules []rbacv1.PolicyRule) map[string]string {
	set := map[string][]string{}
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				set[g+"/"+res] = append(set[g+"/"+res], r.Verbs...)
			}
		}
	}
	out := map[string]string{}
	for k, v := range set {
		sort.Strings(v)
		out[k] = strings.Join(slices.Compact(v), ",")
	}
	return out
}

// The server's Role: exactly this, nothing more.
var serverRules = map[string]string{
	"sandbox.opensandbox.io/batchsandboxes":            "create,delete,get,list,patch,update,watch",
	"sandbox.opensandbox.io/pools":                     "create,delete,get,list,patch,update,watch",
	"sandbox.opensandbox.io/sandboxsnapshots":          "create,delete,get,list,patch,update,watch",
	"sandbox.opensandbox.io/batchsandboxes/finalizers": "update",
	"/pods":                   "get,list,watch",
	"/pods/log":               "get",
	"/events":                 "list,watch",
	"/secrets":                "create,delete,get,list,patch,watch",
	"/persistentvolumeclaims": "create,delete,get,list,patch,watch",
	"/configmaps":             "create,delete,get,list,update",
}

func checkRestricted(t *testing.T, what string, pod *corev1.PodSecurityContext, c *corev1.Container) {
	t.Helper()
	if pod == nil || pod.RunAsNonRoot == nil || !*pod.RunAsNonRoot || pod.RunAsUser == nil || *pod.RunAsUser == 0 {
		t.Errorf("%s: pod securityContext %+v is not non-root", what, pod)
	}
	sc := c.SecurityContext
	if sc == nil {
		t.Fatalf("%s: container %s has no securityContext", what, c.Name)
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("%s: root filesystem not read-only", what)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("%s: privilege escalation allowed", what)
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
		t.Errorf("%s: capabilities %+v, want drop ALL and no add", what, sc.Capabilities)
	}
}

func envVar(c *corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

// TestHelmTemplate renders the chart with each value set and checks the
// objects that matter: the CRDs and ClusterRole from the generated files,
// the controller's and the server's Deployments, the key Secret and the
// config, and the server's least-privilege Role.
func TestHelmTemplate(t *testing.T) {
	root := repoRoot(t)
	generatedRole := decodeManifests(t, readFile(t, filepath.Join(root, "deploy/controller/rbac/role.yaml")))
	wantControllerRules := ruleSet(generatedRole.objs[0].(*rbacv1.ClusterRole).Rules)
	crdFiles, err := filepath.Glob(filepath.Join(root, "deploy/crds/*.yaml"))
	if err != nil || len(crdFiles) == 0 {
		t.Fatalf("deploy/crds: %v (%d files)", err, len(crdFiles))
	}

	for name, sets := range valueSets {
		t.Run(name, func(t *testing.T) {
			const ns = "osb-system"
			r := template(t, ns, sets)
			values := map[string]string{}
			for _, s := range sets {
				k, v, _ := strings.Cut(s, "=")
				values[k] = v
			}

			if len(r.crds) != len(crdFiles) {
				t.Errorf("%d CRDs rendered, deploy/crds has %d", len(r.crds), len(crdFiles))
			}
			for _, crd := range r.crds {
				if !strings.HasSuffix(crd.GetName(), ".sandbox.opensandbox.io") {
					t.Errorf("unexpected CRD %s", crd.GetName())
				}
			}

			// The controller.
			cr := find[*rbacv1.ClusterRole](t, r, "osb-opensandbox-controller")
			if got := ruleSet(cr.Rules); fmt.Sprint(got) != fmt.Sprint(wantControllerRules) {
				t.Errorf("controller ClusterRole rules differ from deploy/controller/rbac/role.yaml:\n got %v\nwant %v", got, wantControllerRules)
			}
			crb := find[*rbacv1.ClusterRoleBinding](t, r, "osb-opensandbox-controller")
			if crb.RoleRef.Name != cr.Name || len(crb.Subjects) != 1 || crb.Subjects[0].Name != "osb-opensandbox-controller" || crb.Subjects[0].Namespace != ns {
				t.Errorf("ClusterRoleBinding %+v", crb)
			}
			ctrl := find[*appsv1.Deployment](t, r, "osb-opensandbox-controller")
			wantReplicas := int32(2)
			if values["controller.replicas"] == "3" {
				wantReplicas = 3
			}
			if ctrl.Namespace != ns || *ctrl.Spec.Replicas != wantReplicas {
				t.Errorf("controller Deployment in %s with %d replicas, want %s and %d", ctrl.Namespace, *ctrl.Spec.Replicas, ns, wantReplicas)
			}
			spec := ctrl.Spec.Template.Spec
			if spec.ServiceAccountName != "osb-opensandbox-controller" || len(spec.Containers) != 1 {
				t.Fatalf("controller pod: service account %q, %d containers", spec.ServiceAccountName, len(spec.Containers))
			}
			c := &spec.Containers[0]
			checkRestricted(t, "controller", spec.SecurityContext, c)
			wantImage, wantPull := "opensandbox/controller:latest", corev1.PullIfNotPresent
			if values["controller.image.tag"] == "v1" {
				wantImage, wantPull = "opensandbox/controller:v1", corev1.PullAlways
			}
			if c.Image != wantImage || c.ImagePullPolicy != wantPull {
				t.Errorf("controller image %s (%s), want %s (%s)", c.Image, c.ImagePullPolicy, wantImage, wantPull)
			}
			wantArgs := []string{"--leader-elect=true", "--health-probe-bind-address=:8081", "--metrics-bind-address=:8080",
				"--task-executor-image=opensandbox/task-executor:latest", "--image-committer-image=opensandbox/image-committer:latest"}
			if reg := values["controller.snapshot.registry"]; reg != "" {
				wantArgs = append(wantArgs, "--snapshot-registry="+reg, "--snapshot-registry-insecure=true", "--snapshot-push-secret=push")
			}
			if values["controller.watchNamespaces"] != "" {
				wantArgs = append(wantArgs, "--watch-namespace=a,b")
			} else if slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--watch-namespace") }) {
				t.Errorf("controller args %q limit the namespaces by default", c.Args)
			}
			for _, a := range wantArgs {
				if !slices.Contains(c.Args, a) {
					t.Errorf("controller args %q lack %s", c.Args, a)
				}
			}
			for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
				if p == nil || p.HTTPGet == nil || p.HTTPGet.Port.String() != "probes" {
					t.Errorf("controller probe %+v, want HTTP on the probes port", p)
				}
			}
			if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "probes" && p.ContainerPort == 8081 }) {
				t.Errorf("controller ports %+v lack probes on 8081", c.Ports)
			}
			metrics := find[*corev1.Service](t, r, "osb-opensandbox-controller-metrics")
			if metrics.Spec.Selector["app.kubernetes.io/instance"] != "osb" || metrics.Spec.Selector["app.kubernetes.io/component"] != "controller" {
				t.Errorf("metrics Service selector %v", metrics.Spec.Selector)
			}
			leRole := find[*rbacv1.Role](t, r, "osb-opensandbox-controller-leader-election")
			if leRole.Namespace != ns || ruleSet(leRole.Rules)["coordination.k8s.io/leases"] == "" {
				t.Errorf("leader-election Role %+v", leRole)
			}

			// The server.
			srv := find[*appsv1.Deployment](t, r, "osb-opensandbox-server")
			wantReplicas = 1
			if values["server.replicas"] == "2" {
				wantReplicas = 2
			}
			if srv.Namespace != ns || *srv.Spec.Replicas != wantReplicas {
				t.Errorf("server Deployment in %s with %d replicas, want %s and %d", srv.Namespace, *srv.Spec.Replicas, ns, wantReplicas)
			}
			sspec := srv.Spec.Template.Spec
			if sspec.ServiceAccountName != "osb-opensandbox-server" || len(sspec.Containers) != 1 {
				t.Fatalf("server pod: service account %q, %d containers", sspec.ServiceAccountName, len(sspec.Containers))
			}
			sc := &sspec.Containers[0]
			checkRestricted(t, "server", sspec.SecurityContext, sc)
			if sc.Image != "opensandbox/server:latest" {
				t.Errorf("server image %s", sc.Image)
			}
			for _, p := range []*corev1.Probe{sc.LivenessProbe, sc.ReadinessProbe} {
				if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/health" {
					t.Errorf("server probe %+v, want HTTP /health", p)
				}
			}

			// The API key: from the chart's Secret, or from existingSecret.
			key := envVar(sc, "OPENSANDBOX_SERVER_API_KEY")
			if key == nil || key.ValueFrom == nil || key.ValueFrom.SecretKeyRef == nil || key.Value != "" {
				t.Fatalf("server env OPENSANDBOX_SERVER_API_KEY = %+v, want it from a Secret", key)
			}
			ref := key.ValueFrom.SecretKeyRef
			if existing := values["server.existingSecret"]; existing != "" {
				if ref.Name != existing || ref.Key != values["server.existingSecretKey"] {
					t.Errorf("API key from %s/%s, want existingSecret %s/%s", ref.Name, ref.Key, existing, values["server.existingSecretKey"])
				}
				if n := count[*corev1.Secret](r); n != 0 {
					t.Errorf("%d Secrets rendered beside existingSecret", n)
				}
			} else {
				secret := find[*corev1.Secret](t, r, ref.Name)
				got := string(secret.Data[ref.Key])
				if want := values["server.apiKey"]; want != "" && got != want {
					t.Errorf("Secret %s[%s] = %q, want server.apiKey %q", ref.Name, ref.Key, got, want)
				}
				if len(got) < 32 && values["server.apiKey"] == "" {
					t.Errorf("generated API key %q is shorter than 32 characters", got)
				}
			}

			// The config.
			var mounted string
			for _, m := range sc.VolumeMounts {
				if m.Name == "config" {
					mounted = m.MountPath
				}
			}
			if cfgPath := envVar(sc, "SANDBOX_CONFIG_PATH"); cfgPath == nil || mounted == "" || filepath.Dir(cfgPath.Value) != mounted {
				t.Errorf("SANDBOX_CONFIG_PATH %+v is not in the config mount %q", cfgPath, mounted)
			}
			cm := find[*corev1.ConfigMap](t, r, "osb-opensandbox-server-config")
			var cfg struct {
				Server struct {
					Port   int    `toml:"port"`
					APIKey string `toml:"api_key"`
				} `toml:"server"`
				Runtime struct {
					Type       string `toml:"type"`
					ExecdImage string `toml:"execd_image"`
				} `toml:"runtime"`
				Kubernetes map[string]any `toml:"kubernetes"`
			}
			if _, err := toml.Decode(cm.Data["config.toml"], &cfg); err != nil {
				t.Fatalf("config.toml: %v\n%s", err, cm.Data["config.toml"])
			}
			if cfg.Runtime.Type != "kubernetes" || cfg.Runtime.ExecdImage != "opensandbox/execd:latest" || cfg.Server.Port != 8080 || cfg.Server.APIKey != "" {
				t.Errorf("config %+v, want runtime kubernetes, execd image, port 8080 and no key in the file", cfg)
			}
			sandboxNS := ns
			if v := values["server.kubernetes.namespace"]; v != "" {
				sandboxNS = v
			}
			k := cfg.Kubernetes
			if k["namespace"] != sandboxNS || k["image_pull_policy"] != "IfNotPresent" {
				t.Errorf("[kubernetes] %v, want namespace %s", k, sandboxNS)
			}
			if v := values["server.kubernetes.serviceAccount"]; v != "" && k["service_account"] != v {
				t.Errorf("[kubernetes] service_account %v, want %s", k["service_account"], v)
			}
			if v := values["server.kubernetes.sandboxCreateTimeoutSeconds"]; v != "" && fmt.Sprint(k["sandbox_create_timeout_seconds"]) != v {
				t.Errorf("[kubernetes] sandbox_create_timeout_seconds %v, want %s", k["sandbox_create_timeout_seconds"], v)
			}
			// The server's own loader takes it as it is: no unknown key,
			// no invalid value, nothing ignored.
			cfgFile := filepath.Join(t.TempDir(), "config.toml")
			if err := os.WriteFile(cfgFile, []byte(cm.Data["config.toml"]), 0o600); err != nil {
				t.Fatal(err)
			}
			env := map[string]string{"HOME": t.TempDir(), serverconfig.EnvAPIKey: "from-the-secret"}
			loaded, warnings, err := serverconfig.Load(cfgFile, func(k string) string { return env[k] })
			if err != nil || len(warnings) > 0 {
				t.Errorf("the server's loader on config.toml: %v, warnings %q\n%s", err, warnings, cm.Data["config.toml"])
			} else if loaded.Runtime.Type != serverconfig.RuntimeKubernetes || loaded.Kubernetes.Namespace != sandboxNS || loaded.Server.APIKey != "from-the-secret" {
				t.Errorf("loaded config: runtime %q, namespace %q, key %q", loaded.Runtime.Type, loaded.Kubernetes.Namespace, loaded.Server.APIKey)
			}
			if v := values["server.kubernetes.readQPS"]; v != "" && fmt.Sprint(loaded.Kubernetes.ReadQPS) != v {
				t.Errorf("[kubernetes] read_qps %v, want %s", loaded.Kubernetes.ReadQPS, v)
			}
			for _, kind := range []string{"requests", "limits"} {
				got := loaded.Kubernetes.ExecdInitResources.Requests
				if kind == "limits" {
					got = loaded.Kubernetes.ExecdInitResources.Limits
				}
				for key, v := range values {
					name, ok := strings.CutPrefix(key, "server.kubernetes.execdInitResources."+kind+".")
					if ok && got[name] != v {
						t.Errorf("[kubernetes.execd_init_resources] %s %s = %q, want %q", kind, name, got[name], v)
					}
				}
			}

			// The server's Role: least privilege, in the sandbox namespace.
			role := find[*rbacv1.Role](t, r, "osb-opensandbox-server")
			if role.Namespace != sandboxNS {
				t.Errorf("server Role in %s, want the sandbox namespace %s", role.Namespace, sandboxNS)
			}
			if got := ruleSet(role.Rules); fmt.Sprint(got) != fmt.Sprint(serverRules) {
				t.Errorf("server Role rules:\n got %v\nwant %v", got, serverRules)
			}
			rb := find[*rbacv1.RoleBinding](t, r, "osb-opensandbox-server")
			if rb.Namespace != sandboxNS || rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != role.Name ||
				len(rb.Subjects) != 1 || rb.Subjects[0].Name != "osb-opensandbox-server" || rb.Subjects[0].Namespace != ns {
				t.Errorf("server RoleBinding %+v", rb)
			}
			if n := count[*rbacv1.ClusterRole](r); n != 1 {
				t.Errorf("%d ClusterRoles rendered, want only the controller's", n)
			}
			svc := find[*corev1.Service](t, r, "osb-opensandbox-server")
			if svc.Spec.Selector["app.kubernetes.io/component"] != "server" || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8080 {
				t.Errorf("server Service %+v", svc.Spec)
			}
		})
	}
}

// TestHelmTemplateRefuses: values the chart cannot honour fail the render
// with the reason.
func TestHelmTemplateRefuses(t *testing.T) {
	for _, tc := range []struct {
		sets []string
		want string
	}{
		{[]string{"ingress.gateway.enabled=true"}, "not available yet"},
		{[]string{"server.apiKey=a", "server.existingSecret=b"}, "exclusive"},
		{[]string{"controller.leaderElect=false"}, "leaderElect"},
	} {
		_, err := runHelmcheck(t, append([]string{"template"}, setArgs(tc.sets)...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("template %v: %v, want an error with %q", tc.sets, err, tc.want)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
