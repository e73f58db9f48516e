package kube

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opensandbox-go/opensandbox/internal/openapitest"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

// installController applies deploy/controller — the manifests users apply —
// through a kustomize overlay that puts every object in ns, prefixes the
// cluster-wide ones with ns (so runs never share a ClusterRole) and limits
// the controller to ns, which other tests' controllers never watch. It
// waits until both replicas are available and one holds the Lease, and
// removes the cluster-wide objects when the test ends (ns takes the rest).
func (c *cluster) installController(t *testing.T, ns string) {
	t.Helper()
	if c.kubectl == "" {
		t.Fatal("cluster.env names no OSB_KUBE_BIN, so there is no kubectl to apply deploy/controller with")
	}
	c.installCRDs(t)
	overlay := t.TempDir()
	// kustomize takes a base only by a relative path.
	base, err := filepath.Rel(overlay, openapitest.RepoPath("deploy/controller"))
	if err != nil {
		t.Fatal(err)
	}
	kustomization := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: %[1]s
namePrefix: %[1]s-
resources:
- %[2]s
patches:
- target: {kind: Namespace}
  patch: |-
    $patch: delete
    apiVersion: v1
    kind: Namespace
    metadata:
      name: unused
- target: {kind: Deployment, name: opensandbox-controller}
  patch: |-
    - op: add
      path: /spec/template/spec/containers/0/args/-
      value: --watch-namespace=%[1]s
`, ns, base)
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}
	var out []byte
	cmd := exec.Command(c.kubectl, "--kubeconfig", c.kubecfg, "apply", "--server-side", "--field-manager", "kube-e2e", "-k", overlay)
	out, err = cmd.CombinedOutput()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		rbac := c.client.RbacV1()
		if err := rbac.ClusterRoleBindings().Delete(ctx, ns+"-opensandbox-controller", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete ClusterRoleBinding: %v", err)
		}
		if err := rbac.ClusterRoles().Delete(ctx, ns+"-opensandbox-controller", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete ClusterRole: %v", err)
		}
	})
	if err != nil {
		t.Fatalf("kubectl apply -k deploy/controller (overlay): %v\n%s", err, out)
	}
	t.Logf("kubectl apply -k:\n%s", out)

	name := ns + "-opensandbox-controller"
	ctx, cancel := context.WithTimeout(context.Background(), podTimeout)
	defer cancel()
	var dep *appsv1.Deployment
	err = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		dep, err = c.client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return dep.Status.ObservedGeneration == dep.Generation && dep.Status.AvailableReplicas == *dep.Spec.Replicas, nil
	})
	if err != nil {
		t.Fatalf("deployment %s not available: %v (status %+v)\n%s", name, err, dep.Status, c.controllerPods(ns))
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("controller pods:\n%s", c.controllerPods(ns))
		}
	})
}

// controllerPods describes the controller's pods and the end of their logs,
// for failure messages.
func (c *cluster) controllerPods(ns string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=opensandbox-controller"})
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

// TestInClusterInstall installs the operator the way users do (deploy/:
// Deployment, RBAC from the generated role) and drives it: a template-mode
// BatchSandbox of three replicas whose execd answers on the published pod
// IPs, an expireTime that deletes its BatchSandbox and pods, and bad specs
// the apiserver refuses with the CRDs' messages.
func TestInClusterInstall(t *testing.T) {
	c := connect(t)
	ns := c.namespace(t)
	c.installController(t, ns)
	cl := c.sandboxClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*podTimeout)
	defer cancel()

	bsbx := &sandboxv1alpha1.BatchSandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agents"},
		Spec:       sandboxv1alpha1.BatchSandboxSpec{Replicas: ptr(int32(3)), Template: ptr(execdPodTemplate())},
	}
	if err := cl.Create(ctx, bsbx); err != nil {
		t.Fatalf("create BatchSandbox: %v", err)
	}
	ips := waitEndpoints(ctx, t, cl, bsbx, 3)
	httpClient := &http.Client{Timeout: 10 * time.Second}
	for i, ip := range ips {
		pod, err := c.client.CoreV1().Pods(ns).Get(ctx, fmt.Sprintf("agents-%d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pod.Status.PodIP != ip {
			t.Errorf("endpoint %d = %s, but pod %s has IP %s", i, ip, pod.Name, pod.Status.PodIP)
		}
		// execd itself, from the host, on the published address.
		resp, err := httpClient.Get(fmt.Sprintf("http://%s:%d/ping", ip, execdPort))
		if err != nil {
			t.Fatalf("execd of replica %d on %s: %v", i, ip, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("execd of replica %d: /ping answered %s %q", i, resp.Status, body)
		}
	}

	// expireTime: the controller deletes the BatchSandbox, and its pods go
	// with it.
	expiring := &sandboxv1alpha1.BatchSandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "short-lived"},
		Spec: sandboxv1alpha1.BatchSandboxSpec{
			Replicas: ptr(int32(1)), Template: ptr(execdPodTemplate()),
			ExpireTime: &metav1.Time{Time: time.Now().Add(5 * time.Second)},
		},
	}
	if err := cl.Create(ctx, expiring); err != nil {
		t.Fatalf("create expiring BatchSandbox: %v", err)
	}
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		err := cl.Get(ctx, client.ObjectKeyFromObject(expiring), &sandboxv1alpha1.BatchSandbox{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		t.Fatalf("expired BatchSandbox not deleted: %v", err)
	}
	err = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := c.client.CoreV1().Pods(ns).Get(ctx, "short-lived-0", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		t.Fatalf("pod of the expired BatchSandbox not deleted: %v", err)
	}

	// Bad specs never reach the controller: the apiserver refuses them
	// with the CRDs' own messages.
	bad := []struct {
		name string
		obj  client.Object
		want string
	}{
		{"neither template nor poolRef", &sandboxv1alpha1.BatchSandbox{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad-empty"},
			Spec:       sandboxv1alpha1.BatchSandboxSpec{Replicas: ptr(int32(1))},
		}, "spec.template and spec.poolRef"},
		{"negative replicas", &sandboxv1alpha1.BatchSandbox{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad-replicas"},
			Spec:       sandboxv1alpha1.BatchSandboxSpec{Replicas: ptr(int32(-1)), Template: ptr(execdPodTemplate())},
		}, "spec.replicas"},
		{"pool bufferMin above bufferMax", &sandboxv1alpha1.Pool{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad-pool"},
			Spec: sandboxv1alpha1.PoolSpec{
				Template:     execdPodTemplate(),
				CapacitySpec: sandboxv1alpha1.CapacitySpec{BufferMin: 5, BufferMax: 1, PoolMin: 0, PoolMax: 10},
			},
		}, "bufferMin must not exceed bufferMax"},
	}
	for _, b := range bad {
		err := cl.Create(ctx, b.obj)
		if err == nil {
			t.Errorf("%s: created", b.name)
			continue
		}
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: refused with %v, want an Invalid error naming %q", b.name, err, b.want)
		}
	}
}

// waitEndpoints waits until bsbx publishes n endpoints and reports n ready
// replicas, and returns the endpoints.
func waitEndpoints(ctx context.Context, t *testing.T, cl client.Client, bsbx *sandboxv1alpha1.BatchSandbox, n int) []string {
	t.Helper()
	var ips []string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(bsbx), bsbx); err != nil {
			return false, err
		}
		got, err := sandboxv1alpha1.Endpoints(bsbx)
		if err != nil {
			return false, err
		}
		ips = got
		if len(ips) != n || int(bsbx.Status.Ready) != n {
			return false, nil
		}
		for _, ip := range ips {
			if ip == "" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("BatchSandbox %s not ready with %d endpoints: %v (endpoints %q, status %+v)", bsbx.Name, n, err, ips, bsbx.Status)
	}
	return ips
}
