package kube

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/opensandbox-go/opensandbox/internal/openapitest"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

var (
	helmcheckOnce sync.Once
	helmcheckBin  string
	helmcheckErr  error
)

// helmcheck builds tools/helmcheck (Helm's Go module; a module of its own,
// see its doc) into bin/ once per test binary.
func helmcheck(t *testing.T) string {
	t.Helper()
	helmcheckOnce.Do(func() {
		dir := openapitest.RepoPath("tools/helmcheck")
		// bin/helmcheck, as make helmcheck builds it (go's cache makes a
		// rebuild quick; a temporary file would be left behind).
		helmcheckBin = openapitest.RepoPath("bin/helmcheck")
		cmd := exec.Command("go", "build", "-buildvcs=false", "-o", helmcheckBin, ".")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			helmcheckErr = fmt.Errorf("go build tools/helmcheck: %w\n%s", err, out)
		}
	})
	if helmcheckErr != nil {
		t.Fatal(helmcheckErr)
	}
	return helmcheckBin
}

// helm runs one helmcheck command against the test cluster.
func (c *cluster) helm(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command(helmcheck(t), append(args[:1:1], append([]string{"--kubeconfig", c.kubecfg}, args[1:]...)...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helmcheck %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("helmcheck %s:\n%s", args[0], out)
}

// TestHelmInstall installs deploy/helm/opensandbox with Helm's Go module
// into a fresh namespace (its controller limited to that namespace, so
// that it never acts on other tests' resources), waits for the controller
// and the server to be available, drives the server through its pod IP —
// /health, the API key, and a sandbox created with the SDK running a
// command — and uninstalls the release, which must leave nothing behind.
func TestHelmInstall(t *testing.T) {
	c := connect(t)
	ns := c.namespace(t)
	c.installCRDs(t) // current CRDs; Helm leaves existing ones alone
	release := "helm-" + token(t)[:8]
	prefix := release + "-opensandbox"
	key := token(t) + token(t)
	// Cluster-wide objects are not in ns: remove them if the test stops
	// before its uninstall.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		rbac := c.client.RbacV1()
		if err := rbac.ClusterRoleBindings().Delete(ctx, prefix+"-controller", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete ClusterRoleBinding: %v", err)
		}
		if err := rbac.ClusterRoles().Delete(ctx, prefix+"-controller", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete ClusterRole: %v", err)
		}
	})

	c.helm(t, "install", "--namespace", ns, "--name", release, "--wait=false",
		"--set", "controller.watchNamespaces={"+ns+"}",
		"--set", "server.apiKey="+key,
		openapitest.RepoPath("deploy/helm/opensandbox"))

	ctx, cancel := context.WithTimeout(context.Background(), 2*podTimeout)
	defer cancel()
	// The uninstall and its check run whatever happened before.
	if err := c.waitDeployment(ctx, ns, prefix+"-controller", nil); err != nil {
		t.Error(err)
	} else if err := c.waitDeployment(ctx, ns, prefix+"-server", c.serverCrashed); err != nil {
		t.Error(err)
	} else {
		c.driveServer(ctx, t, ns, release, key)
	}

	c.helm(t, "uninstall", "--namespace", ns, "--name", release)
	c.assertReleaseGone(t, ns, release, prefix)
}

// driveServer talks to the chart's server through its pod IP: /health, the
// API key from the Secret, and a sandbox created with the SDK that runs a
// command (the server's kubernetes runtime). It reports with t.Errorf, so
// that the caller still uninstalls.
func (c *cluster) driveServer(ctx context.Context, t *testing.T, ns, release, key string) {
	t.Helper()
	// The server through its pod IP.
	pods, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/instance=" + release + ",app.kubernetes.io/component=server",
	})
	if err != nil || len(pods.Items) != 1 || pods.Items[0].Status.PodIP == "" {
		t.Errorf("server pods: %v (%d)", err, len(pods.Items))
		return
	}
	base := "http://" + pods.Items[0].Status.PodIP + ":8080"
	httpClient := &http.Client{Timeout: 10 * time.Second}
	for _, tc := range []struct {
		path, key string
		want      int
	}{
		{"/health", "", http.StatusOK},
		{"/v1/sandboxes", "", http.StatusUnauthorized},
		{"/v1/sandboxes", "wrong", http.StatusUnauthorized},
		{"/v1/sandboxes", key, http.StatusOK},
	} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+tc.path, nil)
		if err != nil {
			t.Error(err)
			return
		}
		if tc.key != "" {
			req.Header.Set("OPEN-SANDBOX-API-KEY", tc.key)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Errorf("GET %s: %v", tc.path, err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("GET %s (key %q): %s %s, want %d", tc.path, tc.key, resp.Status, body, tc.want)
		}
	}

	// A sandbox through the server's kubernetes runtime.
	sdk, err := sandbox.NewClient(sandbox.WithDomain(base), sandbox.WithAPIKey(key))
	if err != nil {
		t.Error(err)
		return
	}
	sb, err := sdk.Create(ctx, sandbox.CreateOptions{
		Image: baseImage, Entrypoint: []string{"sleep", "infinity"}, Timeout: 10 * time.Minute,
		Resources: map[string]string{"cpu": "500m", "memory": "256Mi"}, ReadyTimeout: podTimeout,
	})
	if err != nil {
		t.Errorf("create a sandbox through the chart's server: %v\nserver pods:\n%s", err, c.podsReport(ns, "server"))
		return
	}
	ex, err := sb.Run(ctx, "echo hello from $(hostname)", sandbox.RunOptions{})
	if err != nil || ex.Error != nil || !strings.HasPrefix(ex.Text(), "hello from ") {
		t.Errorf("run in the sandbox: %v, %+v", err, ex)
	}
	if err := sb.Kill(ctx); err != nil {
		t.Errorf("kill the sandbox: %v", err)
	}

}

// waitDeployment waits until the Deployment's replicas are all available;
// crashed, when set, ends the wait early with the reason a pod failed.
func (c *cluster) waitDeployment(ctx context.Context, ns, name string, crashed func(ctx context.Context, ns string) string) error {
	var dep *appsv1.Deployment
	var reason string
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var err error
		dep, err = c.client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if crashed != nil {
			if reason = crashed(ctx, ns); reason != "" {
				return false, fmt.Errorf("a pod of %s failed", name)
			}
		}
		return dep.Status.ObservedGeneration == dep.Generation && dep.Spec.Replicas != nil &&
			dep.Status.AvailableReplicas == *dep.Spec.Replicas && dep.Status.UpdatedReplicas == *dep.Spec.Replicas, nil
	})
	if err != nil {
		component := strings.TrimPrefix(name[strings.LastIndex(name, "-")+1:], "-")
		status := "no Deployment"
		if dep != nil {
			status = fmt.Sprintf("%+v", dep.Status)
		}
		return fmt.Errorf("deployment %s not available: %w\n%s\nstatus %s\npods:\n%s", name, err, reason, status, c.podsReport(ns, component))
	}
	return nil
}

// serverCrashed reports a server container that exited, with its logs; a
// server that refuses runtime.type "kubernetes" is named as such.
func (c *cluster) serverCrashed(ctx context.Context, ns string) string {
	pods, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=server"})
	if err != nil {
		return ""
	}
	for _, p := range pods.Items {
		for _, st := range p.Status.ContainerStatuses {
			term := st.State.Terminated
			if term == nil {
				term = st.LastTerminationState.Terminated
			}
			if term == nil {
				continue
			}
			logs, _ := c.client.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{
				Container: st.Name, Previous: st.State.Terminated == nil, TailLines: ptr(int64(40)),
			}).Do(ctx).Raw()
			if len(logs) == 0 {
				continue // the kubelet has not kept them yet: look again
			}
			msg := fmt.Sprintf("server container of %s exited (code %d, %s):\n%s", p.Name, term.ExitCode, term.Reason, logs)
			if l := string(logs); strings.Contains(l, "runtime.type") && strings.Contains(l, "kubernetes") &&
				(strings.Contains(l, "not supported") || strings.Contains(l, "cannot run")) {
				msg = "the server refuses runtime.type = \"kubernetes\": the chart needs the server's kubernetes runtime (issue 13)\n" + msg
			}
			return msg
		}
	}
	return ""
}

// podsReport describes a component's pods and the end of their logs.
func (c *cluster) podsReport(ns, component string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=" + component})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for i := range pods.Items {
		p := &pods.Items[i]
		b.WriteString(c.describe(ns, p.Name, p))
		logs, err := c.client.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: ptr(int64(40))}).Do(ctx).Raw()
		fmt.Fprintf(&b, "logs of %s (err %v):\n%s\n", p.Name, err, logs)
	}
	return b.String()
}

// assertReleaseGone checks that the uninstall removed every object of the
// release: its namespaced objects (by the instance label), Helm's release
// records, the cluster-wide RBAC, and the pods (which go with their
// Deployments a little later).
func (c *cluster) assertReleaseGone(t *testing.T, ns, release, prefix string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), podTimeout)
	defer cancel()
	instance := metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release}
	core, apps, rbac := c.client.CoreV1(), c.client.AppsV1(), c.client.RbacV1()
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pods, err := core.Pods(ns).List(ctx, instance)
		if err != nil {
			return false, err
		}
		return len(pods.Items) == 0, nil
	})
	if err != nil {
		t.Errorf("pods of the release still there after uninstall: %v", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	left := map[string]int{}
	helmRecords := metav1.ListOptions{LabelSelector: "owner=helm,name=" + release}
	for kind, list := range map[string]func() (int, error){
		"Deployments": func() (int, error) { l, err := apps.Deployments(ns).List(ctx, instance); return lenOf(l, err) },
		"Services":    func() (int, error) { l, err := core.Services(ns).List(ctx, instance); return lenOf(l, err) },
		"ConfigMaps":  func() (int, error) { l, err := core.ConfigMaps(ns).List(ctx, instance); return lenOf(l, err) },
		"ServiceAccounts": func() (int, error) {
			l, err := core.ServiceAccounts(ns).List(ctx, instance)
			return lenOf(l, err)
		},
		"Roles":        func() (int, error) { l, err := rbac.Roles(ns).List(ctx, instance); return lenOf(l, err) },
		"RoleBindings": func() (int, error) { l, err := rbac.RoleBindings(ns).List(ctx, instance); return lenOf(l, err) },
		"Secrets":      func() (int, error) { l, err := core.Secrets(ns).List(ctx, instance); return lenOf(l, err) },
		// Helm's own records of the release.
		"Helm release records": func() (int, error) { l, err := core.Secrets(ns).List(ctx, helmRecords); return lenOf(l, err) },
	} {
		n, err := list()
		if err != nil {
			t.Errorf("list %s: %v", kind, err)
		}
		if n > 0 {
			left[kind] = n
		}
	}
	if _, err := rbac.ClusterRoles().Get(ctx, prefix+"-controller", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		left["ClusterRole"] = 1
	}
	if _, err := rbac.ClusterRoleBindings().Get(ctx, prefix+"-controller", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		left["ClusterRoleBinding"] = 1
	}
	if len(left) > 0 {
		t.Errorf("uninstall left objects of release %s: %v", release, left)
	}
}

// lenOf is the number of items of a list (nil on error).
func lenOf(l runtime.Object, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	return meta.LenList(l), nil
}
