package kube

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"
)

const (
	// defaultState is where scripts/kube/up.sh keeps the cluster (OSB_KUBE_STATE).
	defaultState = "/var/lib/opensandbox/kube"
	// baseImage is on the node under its plain name (imported by up.sh).
	baseImage = "opensandbox/base:latest"
	// testLabel marks every namespace these tests make, so a cleanup finds
	// what an interrupted run left (the cluster's teardown removes it too).
	testLabel = "io.opensandbox.test"
	// podTimeout bounds a pod's way to Ready; on an idle machine it takes
	// about a second, a loaded shared machine needs far more.
	podTimeout = 3 * time.Minute
)

// cluster is the running test cluster as the tests see it.
type cluster struct {
	config   *rest.Config
	client   *kubernetes.Clientset
	registry string // host:port of the local registry
	kubectl  string // the kubectl built with the cluster
	kubecfg  string // the admin kubeconfig's path
}

// clusterEnv reads the cluster.env file up.sh writes (KEY=VALUE lines).
func clusterEnv(t *testing.T, state string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(state, "cluster.env"))
	if err != nil {
		t.Fatalf("the test cluster is not up (make cluster): %v", err)
	}
	env := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	return env
}

// connect skips the test unless OSB_KUBE_E2E is set and returns a client of
// the running cluster; with the gate set, a cluster that is not up fails.
func connect(t *testing.T) *cluster {
	t.Helper()
	if os.Getenv("OSB_KUBE_E2E") == "" {
		t.Skip("test of the Kubernetes test cluster: run with `make kube-e2e` (OSB_KUBE_E2E=1)")
	}
	state := os.Getenv("OSB_KUBE_STATE")
	if state == "" {
		state = defaultState
	}
	env := clusterEnv(t, state)
	kubecfg := env["KUBECONFIG"]
	if kubecfg == "" {
		t.Fatalf("%s/cluster.env names no KUBECONFIG", state)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubecfg)
	if err != nil {
		t.Fatalf("load kubeconfig %s: %v", kubecfg, err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("client for %s: %v", cfg.Host, err)
	}
	c := &cluster{config: cfg, client: client, registry: env["OSB_KUBE_REGISTRY"], kubecfg: kubecfg}
	if c.registry == "" {
		t.Fatalf("%s/cluster.env names no OSB_KUBE_REGISTRY", state)
	}
	if bin := env["OSB_KUBE_BIN"]; bin != "" {
		c.kubectl = filepath.Join(bin, "kubectl")
	}
	return c
}

func token(t *testing.T) string {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// namespace makes a labelled namespace of the test's own and deletes it
// when the test ends.
func (c *cluster) namespace(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns, err := c.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "kube-e2e-",
			Labels:       map[string]string{testLabel: "kube-e2e"},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.client.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

// waitReady polls the pod until it is Ready and returns it; on failure it
// reports the pod's phase, conditions, container states and events.
func (c *cluster) waitReady(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), podTimeout)
	defer cancel()
	var pod *corev1.Pod
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p, err := c.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil // the apiserver may be slow on a loaded machine; the deadline decides
		}
		pod = p
		if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			return false, fmt.Errorf("pod ended in phase %s", p.Status.Phase)
		}
		for _, cs := range p.Status.ContainerStatuses {
			// A back-off means the step has already failed once; on one node
			// with a loopback registry it does not heal by waiting.
			if w := cs.State.Waiting; w != nil && (w.Reason == "ImagePullBackOff" || w.Reason == "CrashLoopBackOff" ||
				w.Reason == "ErrImageNeverPull" || w.Reason == "CreateContainerConfigError") {
				return false, fmt.Errorf("container %s is waiting: %s: %s", cs.Name, w.Reason, w.Message)
			}
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s not Ready: %v\n%s", ns, name, err, c.describe(ns, name, pod))
	}
	return pod
}

// describe summarises why a pod is not where a test wants it.
func (c *cluster) describe(ns, name string, pod *corev1.Pod) string {
	var b strings.Builder
	if pod != nil {
		fmt.Fprintf(&b, "phase %s, pod IP %q\n", pod.Status.Phase, pod.Status.PodIP)
		for _, cond := range pod.Status.Conditions {
			fmt.Fprintf(&b, "condition %s=%s %s %s\n", cond.Type, cond.Status, cond.Reason, cond.Message)
		}
		for _, cs := range pod.Status.ContainerStatuses {
			fmt.Fprintf(&b, "container %s: %+v\n", cs.Name, cs.State)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	events, err := c.client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err == nil {
		for _, e := range events.Items {
			fmt.Fprintf(&b, "event %s %s: %s\n", e.Type, e.Reason, e.Message)
		}
	}
	return b.String()
}

// waitLogs polls the pod's log until it contains want: a container writes
// its first line some time after it starts, not necessarily before Ready.
func (c *cluster) waitLogs(t *testing.T, ns, name, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), podTimeout)
	defer cancel()
	var last string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		data, err := c.client.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			return false, nil
		}
		last = string(data)
		return strings.Contains(last, want), nil
	})
	if err != nil {
		t.Fatalf("log of %s/%s never contained %q: %v; the log: %q", ns, name, want, err, last)
	}
}

// exec runs a command in the pod through the apiserver and the kubelet's
// streaming server (what kubectl exec does) and returns its stdout.
func (c *cluster) exec(t *testing.T, ns, name string, cmd ...string) (string, string) {
	t.Helper()
	req := c.client.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Command: cmd, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewWebSocketExecutor(c.config, "GET", req.URL().String())
	if err != nil {
		t.Fatalf("exec executor: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}); err != nil {
		t.Fatalf("exec %v in %s/%s: %v (stderr %q)", cmd, ns, name, err, stderr.String())
	}
	return stdout.String(), stderr.String()
}

// listenerPod serves a file holding tok over HTTP on port 8080 from the base
// image's python3, and prints tok to stdout first.
func listenerPod(name, image string, pull corev1.PullPolicy, tok string) *corev1.Pod {
	script := `mkdir -p /srv && printf %s "$TOKEN" > /srv/token && echo "started $TOKEN" && exec python3 -m http.server 8080 --bind 0.0.0.0 --directory /srv`
	zero := int64(0)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{testLabel: "kube-e2e"}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{
				Name:            "main",
				Image:           image,
				ImagePullPolicy: pull,
				Command:         []string{"sh", "-c", script},
				Env:             []corev1.EnvVar{{Name: "TOKEN", Value: tok}},
				Ports:           []corev1.ContainerPort{{ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler: corev1.ProbeHandler{
						HTTPGet: &corev1.HTTPGetAction{Path: "/token", Port: intstr.FromInt32(8080)},
					},
					PeriodSeconds: 1,
				},
			}},
		},
	}
}

func (c *cluster) createPod(t *testing.T, ns string, pod *corev1.Pod) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s/%s: %v", ns, pod.Name, err)
	}
}

// httpGet fetches url from the host.
func httpGet(t *testing.T, url string) string {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s from the host: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %q", url, resp.Status, body)
	}
	return string(body)
}

// TestNodeReady checks the node the cluster consists of: Ready, with the
// kubelet version the cluster was built at, running on containerd.
func TestNodeReady(t *testing.T) {
	c := connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nodes, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list nodes: %v", err)
	}
	if len(nodes.Items) != 1 {
		t.Fatalf("want one node, have %d", len(nodes.Items))
	}
	n := nodes.Items[0]
	ready := false
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			ready = cond.Status == corev1.ConditionTrue
		}
	}
	if !ready {
		t.Errorf("node %s is not Ready: %+v", n.Name, n.Status.Conditions)
	}
	if v := n.Status.NodeInfo.KubeletVersion; !strings.HasPrefix(v, "v1.34.") {
		t.Errorf("kubelet version %q, want v1.34.x", v)
	}
	if rt := n.Status.NodeInfo.ContainerRuntimeVersion; !strings.HasPrefix(rt, "containerd://") {
		t.Errorf("container runtime %q, want containerd", rt)
	}
}

// TestBaseImagePod runs a pod of opensandbox/base:latest (present on the
// node, IfNotPresent) and checks that it becomes Ready, that its IP answers
// from the host, and that exec and logs work through the apiserver.
func TestBaseImagePod(t *testing.T) {
	c := connect(t)
	ns := c.namespace(t)
	tok := token(t)
	c.createPod(t, ns, listenerPod("base", baseImage, corev1.PullIfNotPresent, tok))
	pod := c.waitReady(t, ns, "base")

	ip := net.ParseIP(pod.Status.PodIP)
	if ip == nil {
		t.Fatalf("pod has no IP: %q", pod.Status.PodIP)
	}
	if got := httpGet(t, "http://"+net.JoinHostPort(ip.String(), "8080")+"/token"); got != tok {
		t.Errorf("the pod's listener at %s answered %q, want %q", ip, got, tok)
	}

	out, _ := c.exec(t, ns, "base", "cat", "/srv/token")
	if out != tok {
		t.Errorf("exec cat /srv/token printed %q, want %q", out, tok)
	}
	out, _ = c.exec(t, ns, "base", "sh", "-c", "echo $((6 * 7)) && id -u")
	if out != "42\n0\n" {
		t.Errorf("exec sh -c printed %q, want %q", out, "42\n0\n")
	}

	c.waitLogs(t, ns, "base", "started "+tok)
}

// TestRegistryPull runs a pod whose image is pulled from the local registry
// (imagePullPolicy Always, so the kubelet has containerd pull it over HTTP
// even though the same image is on the node under its plain name).
func TestRegistryPull(t *testing.T) {
	c := connect(t)
	ns := c.namespace(t)
	tok := token(t)
	image := c.registry + "/" + baseImage
	c.createPod(t, ns, listenerPod("pulled", image, corev1.PullAlways, tok))
	pod := c.waitReady(t, ns, "pulled")

	// With Always the kubelet asks containerd to pull, which resolves the tag
	// at the registry (and fetches what the node lacks); an unreachable or
	// misconfigured registry fails the pod with ErrImagePull instead.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	events, err := c.client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=pulled,reason=Pulled"})
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	pulled := false
	for _, e := range events.Items {
		pulled = pulled || strings.Contains(e.Message, "Successfully pulled image \""+image+"\"")
	}
	if !pulled {
		t.Errorf("no event says %s was pulled\n%s", image, c.describe(ns, "pulled", pod))
	}
	if got := httpGet(t, "http://"+net.JoinHostPort(pod.Status.PodIP, "8080")+"/token"); got != tok {
		t.Errorf("the pulled pod's listener answered %q, want %q", got, tok)
	}
	c.waitLogs(t, ns, "pulled", "started "+tok)
}

// TestKubectl checks the kubectl built with the cluster (bin/kubectl): its
// version matches the server's, and exec and logs work through it.
func TestKubectl(t *testing.T) {
	c := connect(t)
	if c.kubectl == "" {
		t.Fatal("cluster.env names no OSB_KUBE_BIN (the directory of the cluster's binaries)")
	}
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, c.kubectl, append([]string{"--kubeconfig", c.kubecfg}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return string(out)
	}
	version := run("version")
	if !strings.Contains(version, "Client Version: v1.34.") || !strings.Contains(version, "Server Version: v1.34.") {
		t.Errorf("kubectl version:\n%s\nwant client and server v1.34.x", version)
	}

	ns := c.namespace(t)
	tok := token(t)
	c.createPod(t, ns, listenerPod("kubectl", baseImage, corev1.PullIfNotPresent, tok))
	c.waitReady(t, ns, "kubectl")
	if out := run("exec", "-n", ns, "kubectl", "--", "cat", "/srv/token"); out != tok {
		t.Errorf("kubectl exec printed %q, want %q", out, tok)
	}
	c.waitLogs(t, ns, "kubectl", "started "+tok)
	if out := run("logs", "-n", ns, "kubectl"); !strings.Contains(out, "started "+tok) {
		t.Errorf("kubectl logs printed %q, want it to contain %q", out, "started "+tok)
	}
}
