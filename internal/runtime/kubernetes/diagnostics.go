package kubernetes

import (
	"context"
	"encoding/json"
	"io"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

// maxLogBytes caps what Logs returns.
const maxLogBytes = 16 << 20

// Logs returns the main container's output (execd's and the entrypoint's);
// nothing while the sandbox has no pod (pending, paused).
func (r *Runtime) Logs(ctx context.Context, id string, opts runtime.LogOptions) ([]byte, error) {
	o, err := r.observe(ctx, id, false)
	if err != nil {
		return nil, err
	}
	if o.pod == nil {
		if o.pod, err = r.poolPod(ctx, o.bsbx); err != nil || o.pod == nil {
			return nil, err
		}
	}
	lo := &corev1.PodLogOptions{Container: mainContainer, LimitBytes: ptr.To(int64(maxLogBytes))}
	if opts.Tail > 0 {
		lo.TailLines = ptr.To(int64(opts.Tail))
	}
	if opts.Since > 0 {
		lo.SinceSeconds = ptr.To(max(int64(opts.Since.Seconds()), 1))
	}
	rc, err := r.cs.CoreV1().Pods(r.ns).GetLogs(o.pod.Name, lo).Stream(ctx)
	if err != nil {
		return nil, apiErr(err, "kubernetes: logs of sandbox %s", id)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, apiErr(err, "kubernetes: logs of sandbox %s", id)
	}
	return b, nil
}

// Inspect returns {"batchSandbox": ..., "pod": ...} as JSON (pod null
// when there is none).
func (r *Runtime) Inspect(ctx context.Context, id string) ([]byte, error) {
	o, err := r.observe(ctx, id, false)
	if err != nil {
		return nil, err
	}
	if o.pod == nil {
		if o.pod, err = r.poolPod(ctx, o.bsbx); err != nil {
			return nil, err
		}
	}
	b, err := json.Marshal(struct {
		BatchSandbox *sandboxv1alpha1.BatchSandbox `json:"batchSandbox"`
		Pod          *corev1.Pod                   `json:"pod"`
	}{o.bsbx, o.pod})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Events returns the newest limit events of the BatchSandbox and its pod,
// oldest first.
func (r *Runtime) Events(ctx context.Context, id string, limit int) ([]runtime.Event, error) {
	o, err := r.observe(ctx, id, false)
	if err != nil {
		return nil, err
	}
	names := []string{id, podName(id)}
	if p, err := r.poolPod(ctx, o.bsbx); err == nil && p != nil {
		names[1] = p.Name
	}
	var out []runtime.Event
	for _, name := range names {
		list, err := r.cs.CoreV1().Events(r.ns).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String(),
		})
		if err != nil {
			return nil, apiErr(err, "kubernetes: events of sandbox %s", id)
		}
		for _, e := range list.Items {
			t := e.LastTimestamp.Time
			if t.IsZero() {
				t = e.EventTime.Time
			}
			if t.IsZero() {
				t = e.CreationTimestamp.Time
			}
			out = append(out, runtime.Event{Time: t, Action: e.Reason, Message: e.InvolvedObject.Kind + " " + name + ": " + e.Message})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out, nil
}

// poolPod is the pool pod a pooled sandbox holds (read from the API: pool
// pods are not in the cache), or nil.
func (r *Runtime) poolPod(ctx context.Context, b *sandboxv1alpha1.BatchSandbox) (*corev1.Pod, error) {
	if b.Spec.PoolRef == "" {
		return nil, nil
	}
	a, err := sandboxv1alpha1.GetAllocation(b, sandboxv1alpha1.AnnotationAllocStatus)
	if err != nil || len(a.Pods) == 0 {
		return nil, nil
	}
	p := &corev1.Pod{}
	if err := r.api.Get(ctx, r.key(a.Pods[0]), p); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, apiErr(err, "kubernetes: pod %s of sandbox %s", a.Pods[0], b.Name)
	}
	return p, nil
}
