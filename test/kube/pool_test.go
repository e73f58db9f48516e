package kube

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

const (
	// execdImage holds the static execd; its "install DIR" copies execd
	// into a volume the sandbox container runs it from.
	execdImage = "opensandbox/execd:latest"
	execdPort  = 44772
)

// execdPodTemplate is a sandbox pod: execd installed by an init container
// and run in the base image, ready once GET /ping answers.
func execdPodTemplate() corev1.PodTemplateSpec {
	mount := []corev1.VolumeMount{{Name: "osb", MountPath: "/opt/osb"}}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{testLabel: "kube-e2e"}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr(int64(0)),
			Volumes:                       []corev1.Volume{{Name: "osb", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			InitContainers: []corev1.Container{{
				Name: "execd-install", Image: execdImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Args: []string{"install", "/opt/osb"}, VolumeMounts: mount,
			}},
			Containers: []corev1.Container{{
				Name: "main", Image: baseImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Command:      []string{"/opt/osb/execd"},
				VolumeMounts: mount,
				Ports:        []corev1.ContainerPort{{ContainerPort: execdPort}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ping", Port: intstr.FromInt32(execdPort)}},
					PeriodSeconds: 1,
				},
			}},
		},
	}
}

func newE2EPool(ns, name string, c sandboxv1alpha1.CapacitySpec) *sandboxv1alpha1.Pool {
	all := intstr.FromString("100%")
	return &sandboxv1alpha1.Pool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: sandboxv1alpha1.PoolSpec{
			Template:        execdPodTemplate(),
			CapacitySpec:    c,
			ScaleStrategy:   &sandboxv1alpha1.ScaleStrategy{MaxUnavailable: &all},
			RecycleStrategy: &sandboxv1alpha1.RecycleStrategy{Type: sandboxv1alpha1.RecycleDelete},
		},
	}
}

// deleteBatchesOnCleanup deletes the BatchSandboxes of ns when the test
// ends, while the operator still runs (cleanups run last-registered
// first), so that their finalizers do not hold the namespace.
func deleteBatchesOnCleanup(t *testing.T, cl client.Client, ns string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := cl.DeleteAllOf(ctx, &sandboxv1alpha1.BatchSandbox{}, client.InNamespace(ns)); err != nil {
			t.Errorf("deleting the BatchSandboxes of %s: %v", ns, err)
			return
		}
		err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			var list sandboxv1alpha1.BatchSandboxList
			if err := cl.List(ctx, &list, client.InNamespace(ns)); err != nil {
				return false, err
			}
			return len(list.Items) == 0, nil
		})
		if err != nil {
			t.Errorf("BatchSandboxes of %s not gone: %v", ns, err)
		}
	})
}

func waitPoolAvailable(ctx context.Context, t *testing.T, cl client.Client, ns, name string, total, available int32) {
	t.Helper()
	var p sandboxv1alpha1.Pool
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
			return false, err
		}
		return p.Status.Total == total && p.Status.Available == available, nil
	})
	if err != nil {
		t.Fatalf("pool %s: want total %d available %d: %v (status %+v)", name, total, available, err, p.Status)
	}
}

// waitPooledBatch waits until b holds n ready pods with n endpoints and
// returns it.
func waitPooledBatch(ctx context.Context, t *testing.T, cl client.Client, b *sandboxv1alpha1.BatchSandbox, n int) []string {
	t.Helper()
	var ips []string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return false, err
		}
		got, err := sandboxv1alpha1.Endpoints(b)
		if err != nil {
			return false, err
		}
		ips = got
		return len(ips) == n && b.Status.Ready == int32(n) && b.Status.Phase == sandboxv1alpha1.BatchSandboxPhaseSucceed, nil
	})
	if err != nil {
		t.Fatalf("BatchSandbox %s not served with %d pool pods: %v (endpoints %q, status %+v)", b.Name, n, err, ips, b.Status)
	}
	return ips
}

func held(t *testing.T, b *sandboxv1alpha1.BatchSandbox) []string {
	t.Helper()
	a, err := sandboxv1alpha1.GetAllocation(b, sandboxv1alpha1.AnnotationAllocStatus)
	if err != nil {
		t.Fatal(err)
	}
	return a.Pods
}

func pingExecd(t *testing.T, ip string) {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get(fmt.Sprintf("http://%s:%d/ping", ip, execdPort))
	if err != nil {
		t.Errorf("execd on %s: %v", ip, err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("execd on %s: GET /ping = %s %q", ip, resp.Status, body)
	}
}

// TestOperatorPoolMode: a Pool keeps warm execd pods; a BatchSandbox with
// poolRef gets them (their execd answers on the published IPs), the pool
// refills, and deleting the batch gives the pods back (Delete: they go and
// are replaced).
func TestOperatorPoolMode(t *testing.T) {
	c := connect(t)
	ns := c.namespace(t)
	c.startOperator(t, ns)
	cl := c.sandboxClient(t)
	deleteBatchesOnCleanup(t, cl, ns)
	ctx, cancel := context.WithTimeout(context.Background(), 2*podTimeout)
	defer cancel()

	if err := cl.Create(ctx, newE2EPool(ns, "warm", sandboxv1alpha1.CapacitySpec{BufferMin: 3, BufferMax: 3, PoolMax: 8})); err != nil {
		t.Fatalf("create Pool: %v", err)
	}
	waitPoolAvailable(ctx, t, cl, ns, "warm", 3, 3)

	b := &sandboxv1alpha1.BatchSandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pooled"},
		Spec:       sandboxv1alpha1.BatchSandboxSpec{Replicas: ptr(int32(3)), PoolRef: "warm"},
	}
	start := time.Now()
	if err := cl.Create(ctx, b); err != nil {
		t.Fatalf("create BatchSandbox: %v", err)
	}
	ips := waitPooledBatch(ctx, t, cl, b, 3)
	t.Logf("3 warm pods allocated and published in %v", time.Since(start))
	names := held(t, b)
	for i, name := range names {
		pod, err := c.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pod.Status.PodIP != ips[i] || pod.Labels[sandboxv1alpha1.LabelPoolName] != "warm" {
			t.Errorf("endpoint %d = %s, pod %s has IP %s labels %v", i, ips[i], name, pod.Status.PodIP, pod.Labels)
		}
		pingExecd(t, ips[i])
	}

	// The pool refills its buffer next to the 3 allocated.
	waitPoolAvailable(ctx, t, cl, ns, "warm", 6, 3)

	uids := map[string]string{}
	for _, name := range names {
		pod, err := c.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			uids[name] = string(pod.UID)
		}
	}
	if err := cl.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		err := cl.Get(ctx, client.ObjectKeyFromObject(b), &sandboxv1alpha1.BatchSandbox{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("BatchSandbox not gone after delete: %v", err)
	}
	for _, name := range names {
		pod, err := c.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil && string(pod.UID) == uids[name] && pod.DeletionTimestamp == nil {
			t.Errorf("released pod %s still runs (recycleStrategy Delete)", name)
		}
	}
	// Nothing allocated; the buffer is back to bufferMin.
	waitPoolAvailable(ctx, t, cl, ns, "warm", 3, 3)
}

// TestOperatorPoolModeKilled kills the controller while a large batch is
// being filled from a pool that grows as pods become ready, starts it
// again, and checks that the batch completes with no pod allocated twice
// and none left over.
func TestOperatorPoolModeKilled(t *testing.T) {
	c := connect(t)
	ns := c.namespace(t)
	op := c.startOperator(t, ns)
	cl := c.sandboxClient(t)
	deleteBatchesOnCleanup(t, cl, ns)
	ctx, cancel := context.WithTimeout(context.Background(), 3*podTimeout)
	defer cancel()

	const n = 12
	if err := cl.Create(ctx, newE2EPool(ns, "grow", sandboxv1alpha1.CapacitySpec{BufferMin: 4, BufferMax: 4, PoolMax: n})); err != nil {
		t.Fatalf("create Pool: %v", err)
	}
	waitPoolAvailable(ctx, t, cl, ns, "grow", 4, 4)
	b := &sandboxv1alpha1.BatchSandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "big"},
		Spec:       sandboxv1alpha1.BatchSandboxSpec{Replicas: ptr(int32(n)), PoolRef: "grow"},
	}
	if err := cl.Create(ctx, b); err != nil {
		t.Fatalf("create BatchSandbox: %v", err)
	}
	// Kill it once part of the batch is allocated.
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return false, err
		}
		h := len(held(t, b))
		return h > 0 && h < n, nil
	})
	if err != nil {
		t.Fatalf("batch never partly allocated: %v", err)
	}
	op.Kill()
	t.Logf("killed the controller with %d of %d pods allocated", len(held(t, b)), n)
	op.Start()

	ips := waitPooledBatch(ctx, t, cl, b, n)
	names := held(t, b)
	if sets.New(names...).Len() != n {
		t.Errorf("alloc-status lists a pod twice: %v", names)
	}
	if sets.New(ips...).Len() != n {
		t.Errorf("endpoints repeat an IP: %v", ips)
	}
	pods, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sandboxv1alpha1.LabelPoolName + "=grow"})
	if err != nil {
		t.Fatal(err)
	}
	var live []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p.Name)
		}
	}
	slices.Sort(live)
	want := slices.Clone(names)
	slices.Sort(want)
	// poolMax n, all held: every pod of the pool is in the batch, no orphan.
	if !slices.Equal(live, want) {
		t.Errorf("pool pods %v, batch holds %v: want the same (poolMax %d, no orphan)", live, want, n)
	}
	for _, ip := range ips {
		pingExecd(t, ip)
	}
}
