// Command kube-bench measures pool mode on the real test cluster (make
// cluster): the time from creating a BatchSandbox of -n replicas with
// poolRef, against a Pool holding -n ready idle pods, to all -n endpoints
// published — and, in the same run, the same -n sandboxes in template mode
// (pods created on demand), with their ratio. It also counts the API
// writes the controller sends for the pooled allocation, read from the
// controller's own client metrics (rest_client_requests_total, writes =
// POST/PUT/PATCH/DELETE), so other users of the shared cluster do not
// count. The pool's poolMax is -n, so no refill happens in the window.
//
// Then, through the lifecycle server (the real binary, one on the
// kubernetes runtime and one on Docker, in the same run): create -> first
// command on Kubernetes against Docker, and from a warm pool made through
// POST /v1/pools against a cold create on Kubernetes (target <= 0.1).
//
// It runs the controller binary on the host, limited to a namespace of its
// own, and removes that namespace at the end. Without a cluster it prints
// why and exits 0.
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

func main() {
	state := flag.String("state", envOr("OSB_KUBE_STATE", "/var/lib/opensandbox/kube"), "state directory of the test cluster (its cluster.env)")
	controller := flag.String("controller", "bin/opensandbox-controller", "controller binary")
	server := flag.String("server", "bin/opensandbox-server", "lifecycle server binary")
	execd := flag.String("execd", "bin/execd", "execd binary (for the server on Docker)")
	rounds := flag.Int("rounds", 5, "create -> first command rounds per side through the server")
	crds := flag.String("crds", "deploy/crds", "CRD manifests to apply")
	image := flag.String("image", "opensandbox/base:latest", "sandbox image (present on the node)")
	n := flag.Int("n", 100, "sandboxes per side")
	flag.Parse()
	// The informers in this process log through controller-runtime, which
	// prints a stack trace after 30 s when nobody set its logger.
	ctrllog.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if *n < 1 {
		fmt.Fprintln(os.Stderr, "kube-bench: -n must be at least 1")
		os.Exit(2)
	}
	b, err := connect(*state)
	if err != nil {
		fmt.Printf("kube pool mode: skipped: the test cluster is not up (make cluster): %v\n", err)
		return
	}
	b.controller, b.crds, b.image, b.n = *controller, *crds, *image, *n
	b.server, b.execd, b.rounds = *server, *execd, *rounds
	if err := b.run(); err != nil {
		fmt.Fprintln(os.Stderr, "kube-bench:", err)
		os.Exit(1)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

type bench struct {
	cfg        *rest.Config
	cl         client.WithWatch
	kubecfg    string
	kubectl    string
	controller string
	server     string
	execd      string
	rounds     int
	crds       string
	image      string
	n          int
	ns         string
}

// connect reads cluster.env and checks that the apiserver answers.
func connect(state string) (*bench, error) {
	data, err := os.ReadFile(filepath.Join(state, "cluster.env"))
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "="); ok {
			env[k] = v
		}
	}
	kubecfg := env["KUBECONFIG"]
	if kubecfg == "" || env["OSB_KUBE_BIN"] == "" {
		return nil, fmt.Errorf("%s/cluster.env names no KUBECONFIG or OSB_KUBE_BIN", state)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubecfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubecfg, err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := sandboxv1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	cl, err := client.NewWithWatch(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.List(ctx, &corev1.NodeList{}); err != nil {
		return nil, fmt.Errorf("apiserver %s: %w", cfg.Host, err)
	}
	return &bench{cfg: cfg, cl: cl, kubecfg: kubecfg, kubectl: filepath.Join(env["OSB_KUBE_BIN"], "kubectl")}, nil
}

func (b *bench) run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, b.kubectl, "--kubeconfig", b.kubecfg, "apply", "--server-side", "--force-conflicts",
		"--field-manager", "kube-bench", "-f", b.crds).CombinedOutput(); err != nil {
		return fmt.Errorf("applying %s: %v\n%s", b.crds, err, out)
	}
	if out, err := exec.CommandContext(ctx, b.kubectl, "--kubeconfig", b.kubecfg, "wait", "--for=condition=Established", "--timeout=60s",
		"crd/batchsandboxes.sandbox.opensandbox.io", "crd/pools.sandbox.opensandbox.io").CombinedOutput(); err != nil {
		return fmt.Errorf("waiting for the CRDs: %v\n%s", err, out)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "kube-bench-", Labels: map[string]string{"io.opensandbox.test": "kube-bench"}}}
	if err := b.cl.Create(ctx, ns); err != nil {
		return fmt.Errorf("creating the namespace: %w", err)
	}
	b.ns = ns.Name
	op, err := b.startController(ctx)
	if err != nil {
		return err
	}
	defer func() {
		// Batches first, while the controller runs, so that their
		// finalizers let go; then the namespace.
		dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer dcancel()
		_ = b.cl.DeleteAllOf(dctx, &sandboxv1alpha1.BatchSandbox{}, client.InNamespace(b.ns))
		_ = b.waitNone(dctx)
		op.stop()
		_ = b.cl.Delete(dctx, ns)
	}()

	pooled, writes, err := b.poolSide(ctx, op)
	if err != nil {
		return fmt.Errorf("pool mode: %w", err)
	}
	if err := b.clear(ctx); err != nil {
		return err
	}
	templ, err := b.templateSide(ctx)
	if err != nil {
		return fmt.Errorf("template mode: %w", err)
	}
	verdict := "met"
	if pooled > 500*time.Millisecond {
		verdict = "MISSED"
	}
	fmt.Printf("kube: %d sandboxes -> %d endpoints published: pool mode %v | template mode %v | ratio %.3f | target pool <= 0.5s: %s\n",
		b.n, b.n, pooled.Round(time.Millisecond), templ.Round(time.Millisecond), float64(pooled)/float64(templ), verdict)
	fmt.Printf("kube: API writes by the controller for the pooled allocation of %d pods (every object: the BatchSandbox's allocation and status, the Pool's status): %s\n", b.n, writes)
	if err := b.clear(ctx); err != nil {
		return err
	}
	return b.serverSide(b.rounds)
}

func (b *bench) template() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		TerminationGracePeriodSeconds: ptr(int64(0)),
		Containers: []corev1.Container{{
			Name: "main", Image: b.image, ImagePullPolicy: corev1.PullIfNotPresent,
			Command: []string{"sleep", "infinity"},
		}},
	}}
}

// poolSide fills a Pool with n ready pods, then times a BatchSandbox of n
// replicas claiming them.
func (b *bench) poolSide(ctx context.Context, op *controller) (time.Duration, string, error) {
	all := intstr.FromString("100%")
	n := int32(b.n)
	pool := &sandboxv1alpha1.Pool{
		ObjectMeta: metav1.ObjectMeta{Namespace: b.ns, Name: "warm"},
		Spec: sandboxv1alpha1.PoolSpec{
			Template:        b.template(),
			CapacitySpec:    sandboxv1alpha1.CapacitySpec{BufferMin: n, BufferMax: n, PoolMax: n},
			ScaleStrategy:   &sandboxv1alpha1.ScaleStrategy{MaxUnavailable: &all},
			RecycleStrategy: &sandboxv1alpha1.RecycleStrategy{Type: sandboxv1alpha1.RecycleDelete},
		},
	}
	if err := b.cl.Create(ctx, pool); err != nil {
		return 0, "", err
	}
	t0 := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 20*time.Minute, true, func(ctx context.Context) (bool, error) {
		err := b.cl.Get(ctx, client.ObjectKeyFromObject(pool), pool)
		return err == nil && pool.Status.Available == n, err
	})
	if err != nil {
		return 0, "", fmt.Errorf("pool never had %d ready pods (status %+v): %w", n, pool.Status, err)
	}
	fmt.Fprintf(os.Stderr, "kube-bench: warm pool of %d ready pods in %v\n", n, time.Since(t0).Round(time.Second))
	// Let the pool's own status writes settle before counting.
	time.Sleep(2 * time.Second)
	before, err := op.writes(ctx)
	if err != nil {
		return 0, "", err
	}
	bsbx := &sandboxv1alpha1.BatchSandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: b.ns, Name: "pooled"},
		Spec:       sandboxv1alpha1.BatchSandboxSpec{Replicas: &n, PoolRef: "warm"},
	}
	d, err := b.timeEndpoints(ctx, bsbx)
	if err != nil {
		return 0, "", err
	}
	// The status write and the pool's status follow the endpoints; give
	// them a moment, then count.
	time.Sleep(2 * time.Second)
	after, err := op.writes(ctx)
	if err != nil {
		return 0, "", err
	}
	return d, diffWrites(before, after, b.n), nil
}

func (b *bench) templateSide(ctx context.Context) (time.Duration, error) {
	n := int32(b.n)
	t := b.template()
	bsbx := &sandboxv1alpha1.BatchSandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: b.ns, Name: "templated"},
		Spec:       sandboxv1alpha1.BatchSandboxSpec{Replicas: &n, Template: &t},
	}
	return b.timeEndpoints(ctx, bsbx)
}

// timeEndpoints creates bsbx and returns the time until its endpoints
// annotation lists b.n IPs, watched as it changes (a watch the apiserver
// closes is opened again, after a read of the current state).
func (b *bench) timeEndpoints(ctx context.Context, bsbx *sandboxv1alpha1.BatchSandbox) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
	defer cancel()
	done := func(got *sandboxv1alpha1.BatchSandbox) (bool, error) {
		ips, err := sandboxv1alpha1.Endpoints(got)
		return len(ips) == b.n, err
	}
	w, err := b.cl.Watch(ctx, &sandboxv1alpha1.BatchSandboxList{}, client.InNamespace(b.ns))
	if err != nil {
		return 0, fmt.Errorf("watching BatchSandboxes: %w", err)
	}
	t0 := time.Now()
	if err := b.cl.Create(ctx, bsbx); err != nil {
		w.Stop()
		return 0, err
	}
	for {
		for ev := range w.ResultChan() {
			got, ok := ev.Object.(*sandboxv1alpha1.BatchSandbox)
			if !ok || got.Name != bsbx.Name {
				continue
			}
			if ok, err := done(got); ok || err != nil {
				w.Stop()
				return time.Since(t0), err
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return 0, fmt.Errorf("%s: %d endpoints not published within 20m", bsbx.Name, b.n)
		}
		if w, err = b.cl.Watch(ctx, &sandboxv1alpha1.BatchSandboxList{}, client.InNamespace(b.ns)); err != nil {
			return 0, fmt.Errorf("watching BatchSandboxes again: %w", err)
		}
		var cur sandboxv1alpha1.BatchSandbox
		if err := b.cl.Get(ctx, client.ObjectKeyFromObject(bsbx), &cur); err != nil {
			w.Stop()
			return 0, err
		}
		if ok, err := done(&cur); ok || err != nil {
			w.Stop()
			return time.Since(t0), err
		}
	}
}

// clear deletes the batches and pools of the namespace and waits until
// their pods are gone, so that the template side starts on an idle node.
func (b *bench) clear(ctx context.Context) error {
	if err := b.cl.DeleteAllOf(ctx, &sandboxv1alpha1.BatchSandbox{}, client.InNamespace(b.ns)); err != nil {
		return err
	}
	if err := b.waitNone(ctx); err != nil {
		return err
	}
	if err := b.cl.DeleteAllOf(ctx, &sandboxv1alpha1.Pool{}, client.InNamespace(b.ns)); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		err := b.cl.List(ctx, &pods, client.InNamespace(b.ns))
		return err == nil && len(pods.Items) == 0, err
	})
}

func (b *bench) waitNone(ctx context.Context) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		var list sandboxv1alpha1.BatchSandboxList
		err := b.cl.List(ctx, &list, client.InNamespace(b.ns))
		return err == nil && len(list.Items) == 0, err
	})
}

// controller is the opensandbox-controller process of the bench.
type controller struct {
	cmd     *exec.Cmd
	metrics string
	done    chan struct{}
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func (b *bench) startController(ctx context.Context) (*controller, error) {
	metrics, err := freeAddr()
	if err != nil {
		return nil, err
	}
	probe, err := freeAddr()
	if err != nil {
		return nil, err
	}
	logf, err := os.CreateTemp("", "kube-bench-controller-*.log")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(b.controller, "--kubeconfig", b.kubecfg, "--watch-namespace", b.ns,
		"--metrics-bind-address", metrics, "--health-probe-bind-address", probe, "--log-level", "warn",
		// The only controller of its namespace; without a Lease there are
		// no renewals among the writes counted.
		"--leader-elect=false")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s: %w", b.controller, err)
	}
	c := &controller{cmd: cmd, metrics: metrics, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(c.done) }()
	// Ready once /readyz answers (caches synced).
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-c.done:
			return false, fmt.Errorf("controller exited; its log is %s", logf.Name())
		default:
		}
		resp, err := http.Get("http://" + probe + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		c.stop()
		return nil, fmt.Errorf("controller not ready (log %s): %w", logf.Name(), err)
	}
	return c, nil
}

func (c *controller) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(45 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

func (c *controller) scrape(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.metrics+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

// writes sums rest_client_requests_total by write method.
func (c *controller) writes(ctx context.Context) (map[string]float64, error) {
	text, err := c.scrape(ctx)
	if err != nil {
		return nil, fmt.Errorf("controller metrics: %w", err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "rest_client_requests_total{") {
			continue
		}
		i := strings.Index(line, `method="`)
		j := strings.LastIndexByte(line, ' ')
		if i < 0 || j < 0 {
			continue
		}
		method := line[i+len(`method="`):]
		method = method[:strings.IndexByte(method, '"')]
		switch method {
		case "POST", "PUT", "PATCH", "DELETE":
		default:
			continue
		}
		v, err := strconv.ParseFloat(line[j+1:], 64)
		if err != nil {
			continue
		}
		out[method] += v
	}
	return out, nil
}

func diffWrites(before, after map[string]float64, n int) string {
	var total float64
	var parts []string
	for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		d := after[m] - before[m]
		total += d
		if d != 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f", m, d))
		}
	}
	return fmt.Sprintf("%.0f (%s), %.2f per pod", total, strings.Join(parts, ", "), total/float64(n))
}

func ptr[T any](v T) *T { return &v }
