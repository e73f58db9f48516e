package kube

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opensandbox-go/opensandbox/internal/openapitest"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

// The tests of the operator run the real opensandbox-controller binary on
// the host against the test cluster, one per test and limited to the
// test's namespace (--watch-namespace), so tests running side by side (and
// other controllers on the cluster) never act on each other's objects.

var (
	buildOnce   sync.Once
	builtBinary string
	buildErr    error

	crdOnce sync.Once
	crdErr  error
)

// controllerBinary builds cmd/opensandbox-controller once per test process.
func controllerBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "osb-kube-e2e-")
		if err != nil {
			buildErr = err
			return
		}
		builtBinary = filepath.Join(dir, "opensandbox-controller")
		cmd := exec.Command("go", "build", "-o", builtBinary, "./cmd/opensandbox-controller")
		cmd.Dir = openapitest.RepoPath(".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/opensandbox-controller: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBinary
}

// installCRDs applies deploy/crds to the cluster once per test process
// (server-side: the CRDs are too large for a client-side apply).
func (c *cluster) installCRDs(t *testing.T) {
	t.Helper()
	crdOnce.Do(func() {
		if c.kubectl == "" {
			crdErr = errors.New("cluster.env names no OSB_KUBE_BIN, so there is no kubectl to install the CRDs with")
			return
		}
		cmd := exec.Command(c.kubectl, "--kubeconfig", c.kubecfg, "apply", "--server-side", "--force-conflicts",
			"--field-manager", "kube-e2e", "-f", openapitest.RepoPath("deploy/crds"))
		if out, err := cmd.CombinedOutput(); err != nil {
			crdErr = fmt.Errorf("kubectl apply deploy/crds: %v\n%s", err, out)
			return
		}
		cmd = exec.Command(c.kubectl, "--kubeconfig", c.kubecfg, "wait", "--for=condition=Established", "--timeout=60s",
			"crd/batchsandboxes.sandbox.opensandbox.io", "crd/pools.sandbox.opensandbox.io", "crd/sandboxsnapshots.sandbox.opensandbox.io")
		if out, err := cmd.CombinedOutput(); err != nil {
			crdErr = fmt.Errorf("waiting for the CRDs: %v\n%s", err, out)
		}
	})
	if crdErr != nil {
		t.Fatal(crdErr)
	}
}

// sandboxClient is a controller-runtime client of the cluster that knows
// the OpenSandbox kinds; it reads from the apiserver (no cache).
func (c *cluster) sandboxClient(t *testing.T) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := sandboxv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(c.config, client.Options{Scheme: s})
	if err != nil {
		t.Fatalf("client of %s: %v", c.config.Host, err)
	}
	return cl
}

// operator is one opensandbox-controller process of a test.
type operator struct {
	t     *testing.T
	c     *cluster
	ns    string
	args  []string
	log   string // the process's output, appended across restarts
	probe string // host:port of /healthz and /readyz

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has been waited for
}

// startOperator installs the CRDs and starts a controller acting only in ns,
// with extra flags appended; it returns once /readyz answers and stops the
// process when the test ends (printing its log if the test failed).
// startSnapshotOperator is startOperator with what pause/resume and
// snapshots need: the local registry to push to and the node's containerd
// to commit with.
func (c *cluster) startSnapshotOperator(t *testing.T, ns string) *operator {
	t.Helper()
	state := os.Getenv("OSB_KUBE_STATE")
	if state == "" {
		state = defaultState
	}
	sock := clusterEnv(t, state)["OSB_KUBE_CONTAINERD_SOCK"]
	if sock == "" {
		t.Fatalf("%s/cluster.env names no OSB_KUBE_CONTAINERD_SOCK", state)
	}
	op := c.startOperator(t, ns, "--snapshot-registry", c.registry, "--snapshot-registry-insecure",
		"--containerd-socket-path", sock, "--image-committer-image", "opensandbox/image-committer:latest",
		"--commit-job-timeout", "3m")
	// Before the operator stops (cleanups run last-registered first): the
	// snapshots' and batches' finalizers need it, or the namespace stays
	// Terminating for good (a CI run left one so).
	cl := c.sandboxClient(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for _, obj := range []client.Object{&sandboxv1alpha1.SandboxSnapshot{}, &sandboxv1alpha1.BatchSandbox{}} {
			if err := cl.DeleteAllOf(ctx, obj, client.InNamespace(ns)); err != nil {
				t.Errorf("deleting the %T objects of %s: %v", obj, ns, err)
			}
		}
		err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			var snaps sandboxv1alpha1.SandboxSnapshotList
			var batches sandboxv1alpha1.BatchSandboxList
			if err := cl.List(ctx, &snaps, client.InNamespace(ns)); err != nil {
				return false, err
			}
			if err := cl.List(ctx, &batches, client.InNamespace(ns)); err != nil {
				return false, err
			}
			return len(snaps.Items) == 0 && len(batches.Items) == 0, nil
		})
		if err != nil {
			t.Errorf("snapshots and batches of %s not gone while the operator ran: %v", ns, err)
		}
	})
	return op
}

func (c *cluster) startOperator(t *testing.T, ns string, extra ...string) *operator {
	t.Helper()
	c.installCRDs(t)
	op := &operator{t: t, c: c, ns: ns, log: filepath.Join(t.TempDir(), "controller.log")}
	op.args = append([]string{"--kubeconfig", c.kubecfg, "--watch-namespace", ns, "--metrics-bind-address", "0"}, extra...)
	op.Start()
	t.Cleanup(func() {
		op.Stop()
		if t.Failed() {
			if data, err := os.ReadFile(op.log); err == nil {
				t.Logf("controller log (%s):\n%s", op.log, tail(data, 200))
			}
		}
	})
	return op
}

// Start starts the process (again, after Kill or Stop) and waits for it to
// be ready: caches synced and, with leader election, the Lease won.
func (op *operator) Start() {
	op.t.Helper()
	op.mu.Lock()
	defer op.mu.Unlock()
	if op.cmd != nil {
		op.t.Fatal("operator already running")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		op.t.Fatal(err)
	}
	op.probe = ln.Addr().String()
	ln.Close()
	f, err := os.OpenFile(op.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		op.t.Fatal(err)
	}
	cmd := exec.Command(controllerBinary(op.t), append(op.args, "--health-probe-bind-address", op.probe)...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		op.t.Fatalf("start opensandbox-controller: %v", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(done)
	}()
	op.cmd, op.done = cmd, done

	// Ready means the caches synced; the reconcilers run once the Lease is
	// won, which /readyz does not tell, so the tests wait on what the
	// controller does, not on this.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		select {
		case <-done:
			op.cmd = nil
			data, _ := os.ReadFile(op.log)
			op.t.Fatalf("opensandbox-controller exited before it was ready:\n%s", tail(data, 60))
		case <-ctx.Done():
			op.t.Fatalf("opensandbox-controller not ready on %s within 2m", op.probe)
		case <-time.After(100 * time.Millisecond):
		}
		resp, err := http.Get("http://" + op.probe + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
	}
}

// Kill ends the process with SIGKILL: no graceful shutdown, the Lease is
// not released (a restarted controller waits for it to expire).
func (op *operator) Kill() { op.signal(syscall.SIGKILL) }

// Stop ends the process with SIGTERM and waits for it.
func (op *operator) Stop() { op.signal(syscall.SIGTERM) }

func (op *operator) signal(sig syscall.Signal) {
	op.mu.Lock()
	defer op.mu.Unlock()
	if op.cmd == nil {
		return
	}
	_ = op.cmd.Process.Signal(sig)
	select {
	case <-op.done:
	case <-time.After(45 * time.Second):
		_ = op.cmd.Process.Kill()
		<-op.done
	}
	op.cmd = nil
}

// tail is the last n lines of data.
func tail(data []byte, n int) string {
	end := len(data)
	for i := len(data) - 1; i >= 0; i-- {
		if data[i] == '\n' && i != len(data)-1 {
			n--
			if n == 0 {
				return string(data[i+1 : end])
			}
		}
	}
	return string(data)
}

// TestOperatorTemplateMode runs the controller on the cluster: a
// template-mode BatchSandbox of two replicas gets two running pods, and
// their IPs are published in the endpoints annotation.
func TestOperatorTemplateMode(t *testing.T) {
	c := connect(t)
	ns := c.namespace(t)
	c.startOperator(t, ns)
	cl := c.sandboxClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), podTimeout)
	defer cancel()

	replicas := int32(2)
	bsbx := &sandboxv1alpha1.BatchSandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tmpl"},
		Spec: sandboxv1alpha1.BatchSandboxSpec{
			Replicas: &replicas,
			Template: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: ptr(int64(0)),
				Containers: []corev1.Container{{
					Name: "main", Image: baseImage, ImagePullPolicy: corev1.PullIfNotPresent,
					Command: []string{"sleep", "infinity"},
				}},
			}},
		},
	}
	if err := cl.Create(ctx, bsbx); err != nil {
		t.Fatalf("create BatchSandbox: %v", err)
	}
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
		return len(ips) == 2 && ips[0] != "" && ips[1] != "" && bsbx.Status.Ready == 2, nil
	})
	if err != nil {
		t.Fatalf("BatchSandbox not ready with 2 endpoints: %v (endpoints %q, status %+v)", err, ips, bsbx.Status)
	}
	for i, ip := range ips {
		pod, err := c.client.CoreV1().Pods(ns).Get(ctx, fmt.Sprintf("tmpl-%d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pod.Status.PodIP != ip || pod.Status.Phase != corev1.PodRunning {
			t.Errorf("endpoint %d = %s, pod %s has IP %s phase %s", i, ip, pod.Name, pod.Status.PodIP, pod.Status.Phase)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestOperatorKilledMidCreation kills the controller (SIGKILL: no graceful
// shutdown, the Lease is not released) while it creates the pods of a
// BatchSandbox of ten replicas, starts it again and checks the outcome: ten
// pods, one per replica index, each controlled by the BatchSandbox, none
// made twice (no pod's creation is newer than the BatchSandbox's
// endpoints say), and nothing else in the namespace.
func TestOperatorKilledMidCreation(t *testing.T) {
	c := connect(t)
	ns := c.namespace(t)
	// Two requests a second: creating ten pods takes seconds, so the kill
	// below lands in the middle of it, not after.
	op := c.startOperator(t, ns, "--kube-client-qps", "2", "--kube-client-burst", "1")
	cl := c.sandboxClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*podTimeout)
	defer cancel()

	const n = 10
	bsbx := &sandboxv1alpha1.BatchSandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "killed"},
		Spec: sandboxv1alpha1.BatchSandboxSpec{
			Replicas: ptr(int32(n)),
			Template: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: ptr(int64(0)),
				Containers: []corev1.Container{{
					Name: "main", Image: baseImage, ImagePullPolicy: corev1.PullIfNotPresent,
					Command: []string{"sleep", "infinity"},
				}},
			}},
		},
	}
	if err := cl.Create(ctx, bsbx); err != nil {
		t.Fatalf("create BatchSandbox: %v", err)
	}
	// Kill as soon as the first pod exists: the controller is in the middle
	// of creating them (or of recording them), whichever it is.
	err := wait.PollUntilContextCancel(ctx, 5*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pods, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) > 0, err
	})
	if err != nil {
		t.Fatalf("no pod created: %v", err)
	}
	op.Kill()
	pods, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killed the controller with %d of %d pods created", len(pods.Items), n)
	if len(pods.Items) == n {
		t.Fatalf("all %d pods existed when the controller was killed: the test did not kill it mid-creation", n)
	}
	before := map[string]string{} // name -> UID of the pods made before the kill
	for _, p := range pods.Items {
		before[p.Name] = string(p.UID)
	}

	op.Start()
	ips := waitEndpoints(ctx, t, cl, bsbx, n)
	pods, err = c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != n {
		t.Errorf("%d pods in the namespace, want %d", len(pods.Items), n)
	}
	byIP := map[string]string{}
	for _, p := range pods.Items {
		if ref := metav1.GetControllerOf(&p); ref == nil || ref.UID != bsbx.UID {
			t.Errorf("pod %s is not controlled by the BatchSandbox (owner %+v)", p.Name, ref)
		}
		if uid, ok := before[p.Name]; ok && uid != string(p.UID) {
			t.Errorf("pod %s was made again after the restart (UID %s, before %s)", p.Name, p.UID, uid)
		}
		byIP[p.Status.PodIP] = p.Name
	}
	for i, ip := range ips {
		if want := fmt.Sprintf("killed-%d", i); byIP[ip] != want {
			t.Errorf("endpoint %d = %s is pod %q, want %s", i, ip, byIP[ip], want)
		}
	}
}
