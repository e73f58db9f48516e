package v1alpha1_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opensandbox-go/opensandbox/internal/kubetest"
	v1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

// TestCRDs installs deploy/crds into a real kube-apiserver and checks what
// the schemas promise: valid objects of each kind round-trip (spec,
// defaults and the status subresource), the examples are accepted, and
// each validation rule refuses a bad object with a message naming the
// field.
func TestCRDs(t *testing.T) {
	env := kubetest.Start(t)
	t.Run("BatchSandbox", func(t *testing.T) { testBatchSandboxRoundTrip(t, env) })
	t.Run("BatchSandboxPoolModeDefaults", func(t *testing.T) { testBatchSandboxDefaults(t, env) })
	t.Run("Pool", func(t *testing.T) { testPoolRoundTrip(t, env) })
	t.Run("SandboxSnapshot", func(t *testing.T) { testSnapshotRoundTrip(t, env) })
	t.Run("Examples", func(t *testing.T) { testExamples(t, env) })
	t.Run("Refused", func(t *testing.T) { testRefused(t, env) })
	t.Run("RefusedUpdates", func(t *testing.T) { testRefusedUpdates(t, env) })
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// rawAsJSON compares RawExtensions by their JSON value: the apiserver
// re-encodes them with sorted keys.
var rawAsJSON = cmp.Transformer("json", func(r runtime.RawExtension) any {
	var v any
	if err := json.Unmarshal(r.Raw, &v); err != nil {
		return string(r.Raw)
	}
	return v
})

// now is a time as the apiserver stores it (RFC 3339, whole seconds).
func now() metav1.Time { return metav1.NewTime(time.Now().UTC().Truncate(time.Second)) }

func podTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "sandbox"}, Annotations: map[string]string{"note": "kept"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "sandbox", Image: "opensandbox/base:latest", ImagePullPolicy: corev1.PullIfNotPresent,
			Command: []string{"sleep", "infinity"},
		}}},
	}
}

func batch(ns, name string) *v1.BatchSandbox {
	tmpl := podTemplate()
	return &v1.BatchSandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1.BatchSandboxSpec{Replicas: ptr.To[int32](2), Template: &tmpl},
	}
}

func pool(ns, name string) *v1.Pool {
	return &v1.Pool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.PoolSpec{
			Template:     podTemplate(),
			CapacitySpec: v1.CapacitySpec{BufferMin: 1, BufferMax: 3, PoolMin: 1, PoolMax: 10},
		},
	}
}

func snapshot(ns, name string) *v1.SandboxSnapshot {
	return &v1.SandboxSnapshot{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1.SandboxSnapshotSpec{SandboxName: "sbx"},
	}
}

func testBatchSandboxRoundTrip(t *testing.T, env *kubetest.Env) {
	ctx, c, ns := ctxFor(t), env.Client, env.Namespace(t)
	in := batch(ns, "full")
	expire := metav1.NewTime(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	in.Spec.ExpireTime = &expire
	in.Spec.ShardPatches = []runtime.RawExtension{
		{Raw: []byte(`{}`)},
		{Raw: []byte(`{"spec":{"containers":[{"name":"sandbox","env":[{"name":"SHARD","value":"1"}]}]}}`)},
	}
	in.Spec.TaskTemplate = &v1.TaskTemplateSpec{Spec: v1.TaskSpec{
		Process: &v1.ProcessTask{
			Command: []string{"/bin/sh", "-c"}, Args: []string{"echo hi"},
			Env: []corev1.EnvVar{{Name: "A", Value: "1"}}, WorkingDir: "/tmp",
		},
		TimeoutSeconds: ptr.To[int64](60),
	}}
	in.Spec.ShardTaskPatches = []runtime.RawExtension{{Raw: []byte(`{"spec":{"process":{"args":["echo shard 0"]}}}`)}}
	in.Spec.TaskResourcePolicyWhenCompleted = ptr.To(v1.TaskResourcePolicyRelease)
	in.Spec.Pause = ptr.To(false)
	want := in.Spec.DeepCopy()
	if err := c.Create(ctx, in, client.FieldValidation("Strict")); err != nil {
		t.Fatalf("Create: %v", err)
	}

	var got v1.BatchSandbox
	if err := c.Get(ctx, client.ObjectKeyFromObject(in), &got); err != nil {
		t.Fatalf("Get: %v", err)
	}
	if diff := cmp.Diff(*want, got.Spec, rawAsJSON); diff != "" {
		t.Errorf("spec read back differs (-sent +got):\n%s", diff)
	}

	// Status goes through the status subresource and only through it.
	got.Status = v1.BatchSandboxStatus{
		ObservedGeneration: got.Generation, Replicas: 2, Allocated: 2, Ready: 1,
		TaskRunning: 1, TaskSucceed: 1, TaskFailed: 0, TaskPending: 0, TaskUnknown: 0,
		Phase: v1.BatchSandboxPhasePending, PauseObservedGeneration: got.Generation,
		Conditions: []metav1.Condition{
			{Type: v1.BatchSandboxConditionReady, Status: metav1.ConditionFalse, Reason: "PodsNotReady", Message: "1 of 2 pods ready", LastTransitionTime: now()},
			{Type: v1.BatchSandboxConditionPodFailed, Status: metav1.ConditionFalse, Reason: "NoFailure", LastTransitionTime: now()},
		},
	}
	wantStatus := got.Status.DeepCopy()
	if err := c.Status().Update(ctx, &got); err != nil {
		t.Fatalf("Status().Update: %v", err)
	}
	var afterStatus v1.BatchSandbox
	if err := c.Get(ctx, client.ObjectKeyFromObject(in), &afterStatus); err != nil {
		t.Fatalf("Get: %v", err)
	}
	if diff := cmp.Diff(*wantStatus, afterStatus.Status); diff != "" {
		t.Errorf("status read back differs (-sent +got):\n%s", diff)
	}

	afterStatus.Status.Ready = 2
	afterStatus.Status.Phase = v1.BatchSandboxPhaseSucceed
	afterStatus.Spec.Replicas = ptr.To[int32](3)
	if err := c.Update(ctx, &afterStatus); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if afterStatus.Status.Ready != 1 || afterStatus.Status.Phase != v1.BatchSandboxPhasePending {
		t.Errorf("a main-resource Update changed status to ready=%d phase=%s; the status subresource must own it",
			afterStatus.Status.Ready, afterStatus.Status.Phase)
	}
	if *afterStatus.Spec.Replicas != 3 || afterStatus.Generation != got.Generation+1 {
		t.Errorf("after Update: replicas %d generation %d, want 3 and %d", *afterStatus.Spec.Replicas, afterStatus.Generation, got.Generation+1)
	}
}

func testBatchSandboxDefaults(t *testing.T, env *kubetest.Env) {
	ctx, c, ns := ctxFor(t), env.Client, env.Namespace(t)
	for _, poolRef := range []string{"warm", v1.PoolRefAny} {
		in := &v1.BatchSandbox{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "pooled-"},
			Spec:       v1.BatchSandboxSpec{PoolRef: poolRef},
		}
		if err := c.Create(ctx, in); err != nil {
			t.Fatalf("Create(poolRef %q): %v", poolRef, err)
		}
		if in.Spec.Replicas == nil || *in.Spec.Replicas != 1 {
			t.Errorf("poolRef %q: replicas defaulted to %v, want 1", poolRef, in.Spec.Replicas)
		}
		if p := in.Spec.TaskResourcePolicyWhenCompleted; p == nil || *p != v1.TaskResourcePolicyRetain {
			t.Errorf("poolRef %q: taskResourcePolicyWhenCompleted defaulted to %v, want Retain", poolRef, p)
		}
		if in.Spec.Template != nil {
			t.Errorf("poolRef %q: template appeared: %v", poolRef, in.Spec.Template)
		}
	}
	// poolRef "*" may come with a template, which then chooses the pool.
	any := batch(ns, "any-with-template")
	any.Spec.PoolRef = v1.PoolRefAny
	if err := c.Create(ctx, any); err != nil {
		t.Errorf("Create(poolRef \"*\" with a template): %v", err)
	}
}

func testPoolRoundTrip(t *testing.T, env *kubetest.Env) {
	ctx, c, ns := ctxFor(t), env.Client, env.Namespace(t)

	// Left out, the strategies are filled in with their defaults.
	minimal := pool(ns, "minimal")
	if err := c.Create(ctx, minimal, client.FieldValidation("Strict")); err != nil {
		t.Fatalf("Create: %v", err)
	}
	wantDefaults := v1.PoolSpec{
		Template:        podTemplate(),
		CapacitySpec:    minimal.Spec.CapacitySpec,
		ScaleStrategy:   &v1.ScaleStrategy{MaxUnavailable: ptr.To(intstr.FromString(v1.DefaultMaxUnavailable))},
		UpdateStrategy:  &v1.UpdateStrategy{MaxUnavailable: ptr.To(intstr.FromString(v1.DefaultMaxUnavailable))},
		RecycleStrategy: &v1.RecycleStrategy{Type: v1.RecycleDelete},
	}
	var got v1.Pool
	if err := c.Get(ctx, client.ObjectKeyFromObject(minimal), &got); err != nil {
		t.Fatalf("Get: %v", err)
	}
	if diff := cmp.Diff(wantDefaults, got.Spec); diff != "" {
		t.Errorf("defaulted spec differs (-want +got):\n%s", diff)
	}

	full := pool(ns, "full")
	full.Spec.ScaleStrategy = &v1.ScaleStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(2))}
	full.Spec.UpdateStrategy = &v1.UpdateStrategy{MaxUnavailable: ptr.To(intstr.FromString("100%"))}
	full.Spec.RecycleStrategy = &v1.RecycleStrategy{Type: v1.RecycleRestart}
	full.Labels = map[string]string{v1.LabelPoolEvictionHandler: "custom"}
	want := full.Spec.DeepCopy()
	if err := c.Create(ctx, full, client.FieldValidation("Strict")); err != nil {
		t.Fatalf("Create: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(full), &got); err != nil {
		t.Fatalf("Get: %v", err)
	}
	if diff := cmp.Diff(*want, got.Spec); diff != "" {
		t.Errorf("spec read back differs (-sent +got):\n%s", diff)
	}

	got.Status = v1.PoolStatus{ObservedGeneration: got.Generation, Revision: "5d8f7c", Total: 4, Allocated: 1, Available: 3, Updated: 4}
	wantStatus := got.Status
	if err := c.Status().Update(ctx, &got); err != nil {
		t.Fatalf("Status().Update: %v", err)
	}
	var after v1.Pool
	if err := c.Get(ctx, client.ObjectKeyFromObject(full), &after); err != nil {
		t.Fatalf("Get: %v", err)
	}
	if diff := cmp.Diff(wantStatus, after.Status); diff != "" {
		t.Errorf("status read back differs (-sent +got):\n%s", diff)
	}
}

func testSnapshotRoundTrip(t *testing.T, env *kubetest.Env) {
	ctx, c, ns := ctxFor(t), env.Client, env.Namespace(t)
	in := snapshot(ns, "snap")
	in.Labels = map[string]string{v1.LabelSandboxSnapshotName: "snap"}
	if err := c.Create(ctx, in, client.FieldValidation("Strict")); err != nil {
		t.Fatalf("Create: %v", err)
	}
	in.Status = v1.SandboxSnapshotStatus{
		ObservedGeneration: in.Generation,
		Phase:              v1.SandboxSnapshotPhaseSucceed,
		Containers: []v1.ContainerSnapshot{
			{ContainerName: "sandbox", ImageURI: "127.0.0.1:5000/snap/sbx:snap-gen1", ImageDigest: "sha256:" + strings.Repeat("ab", 32)},
			{ContainerName: "egress", ImageURI: "127.0.0.1:5000/snap/sbx-egress:snap-gen1"},
		},
		SourcePodName:  "sbx-0",
		SourceNodeName: "node-1",
		Conditions: []metav1.Condition{
			{Type: v1.SandboxSnapshotConditionReady, Status: metav1.ConditionTrue, Reason: "Pushed", Message: "2 images pushed", LastTransitionTime: now()},
		},
	}
	wantStatus := in.Status.DeepCopy()
	if err := c.Status().Update(ctx, in); err != nil {
		t.Fatalf("Status().Update: %v", err)
	}
	var got v1.SandboxSnapshot
	if err := c.Get(ctx, client.ObjectKeyFromObject(in), &got); err != nil {
		t.Fatalf("Get: %v", err)
	}
	if diff := cmp.Diff(*wantStatus, got.Status); diff != "" {
		t.Errorf("status read back differs (-sent +got):\n%s", diff)
	}
	if got.Spec.SandboxName != "sbx" {
		t.Errorf("spec.sandboxName = %q, want sbx", got.Spec.SandboxName)
	}
}

// testExamples applies every manifest in examples/kubernetes, so that the
// examples the docs point to are proven valid.
func testExamples(t *testing.T, env *kubetest.Env) {
	ctx, c, ns := ctxFor(t), env.Client, env.Namespace(t)
	files, err := filepath.Glob(filepath.Join(env.CRDDir, "..", "..", "examples", "kubernetes", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, f := range files {
		for _, obj := range env.Load(t, f) {
			obj.SetNamespace(ns)
			kind := obj.GetObjectKind().GroupVersionKind().Kind // Create clears it
			if err := c.Create(ctx, obj, client.FieldValidation("Strict")); err != nil {
				t.Errorf("%s: creating %s %s: %v", filepath.Base(f), kind, obj.GetName(), err)
				continue
			}
			kinds[kind] = true
		}
	}
	for _, kind := range []string{"BatchSandbox", "Pool", "SandboxSnapshot"} {
		if !kinds[kind] {
			t.Errorf("examples/kubernetes has no valid %s (files: %v)", kind, files)
		}
	}
}

// refusal is one validation rule: an object that breaks it, and the field
// the apiserver's message must name.
type refusal struct {
	name  string
	obj   func(ns string) client.Object
	field string
	text  string // a piece of the message
}

func testRefused(t *testing.T, env *kubetest.Env) {
	ns := env.Namespace(t)
	bsbx := func(mut func(*v1.BatchSandbox)) func(string) client.Object {
		return func(ns string) client.Object { b := batch(ns, "bad"); mut(b); return b }
	}
	pl := func(mut func(*v1.Pool)) func(string) client.Object {
		return func(ns string) client.Object { p := pool(ns, "bad"); mut(p); return p }
	}
	for _, tc := range []refusal{
		{"replicas below 0", bsbx(func(b *v1.BatchSandbox) { b.Spec.Replicas = ptr.To[int32](-1) }),
			"spec.replicas", "greater than or equal to 0"},
		{"neither template nor poolRef", bsbx(func(b *v1.BatchSandbox) { b.Spec.Template = nil }),
			"spec.poolRef", "exactly one of spec.template and spec.poolRef"},
		{"both template and poolRef", bsbx(func(b *v1.BatchSandbox) { b.Spec.PoolRef = "warm" }),
			"spec.poolRef", "exactly one of spec.template and spec.poolRef"},
		{"poolRef not a name", bsbx(func(b *v1.BatchSandbox) { b.Spec.Template = nil; b.Spec.PoolRef = "Warm_Pool" }),
			"spec.poolRef", "should match"},
		{"pause with replicas 2", bsbx(func(b *v1.BatchSandbox) { b.Spec.Pause = ptr.To(true) }),
			"spec.pause", "replicas is 1"},
		{"pool mode with a task", bsbx(func(b *v1.BatchSandbox) {
			b.Spec.Template, b.Spec.PoolRef = nil, "warm"
			b.Spec.TaskTemplate = &v1.TaskTemplateSpec{Spec: v1.TaskSpec{Process: &v1.ProcessTask{Command: []string{"true"}}}}
		}), "spec.poolRef", "template mode only"},
		{"pool mode paused", bsbx(func(b *v1.BatchSandbox) {
			b.Spec.Template, b.Spec.PoolRef, b.Spec.Replicas, b.Spec.Pause = nil, "warm", ptr.To[int32](1), ptr.To(true)
		}), "spec.poolRef", "template mode only"},
		{"taskResourcePolicyWhenCompleted not in enum", bsbx(func(b *v1.BatchSandbox) {
			b.Spec.TaskResourcePolicyWhenCompleted = ptr.To(v1.TaskResourcePolicy("Keep"))
		}), "spec.taskResourcePolicyWhenCompleted", "Unsupported value"},
		{"task command empty", bsbx(func(b *v1.BatchSandbox) {
			b.Spec.TaskTemplate = &v1.TaskTemplateSpec{Spec: v1.TaskSpec{Process: &v1.ProcessTask{Command: []string{}}}}
		}), "spec.taskTemplate.spec.process.command", ""},
		{"task timeout 0", bsbx(func(b *v1.BatchSandbox) {
			b.Spec.TaskTemplate = &v1.TaskTemplateSpec{Spec: v1.TaskSpec{
				Process: &v1.ProcessTask{Command: []string{"true"}}, TimeoutSeconds: ptr.To[int64](0)}}
		}), "spec.taskTemplate.spec.timeoutSeconds", "greater than or equal to 1"},

		{"pool template without containers", pl(func(p *v1.Pool) { p.Spec.Template.Spec.Containers = nil }),
			"spec.template.spec.containers", "Required value"},
		{"bufferMin below 0", pl(func(p *v1.Pool) { p.Spec.CapacitySpec.BufferMin = -1 }),
			"spec.capacitySpec.bufferMin", "greater than or equal to 0"},
		{"bufferMax below 0", pl(func(p *v1.Pool) { p.Spec.CapacitySpec.BufferMax = -1 }),
			"spec.capacitySpec.bufferMax", "greater than or equal to 0"},
		{"poolMin below 0", pl(func(p *v1.Pool) { p.Spec.CapacitySpec.PoolMin = -1 }),
			"spec.capacitySpec.poolMin", "greater than or equal to 0"},
		{"poolMax below 0", pl(func(p *v1.Pool) { p.Spec.CapacitySpec.PoolMax = -1 }),
			"spec.capacitySpec.poolMax", "greater than or equal to 0"},
		{"bufferMin above bufferMax", pl(func(p *v1.Pool) { p.Spec.CapacitySpec.BufferMin = 4 }),
			"spec.capacitySpec.bufferMin", "bufferMin must not exceed bufferMax"},
		{"poolMin above poolMax", pl(func(p *v1.Pool) { p.Spec.CapacitySpec.PoolMin = 11 }),
			"spec.capacitySpec.poolMin", "poolMin must not exceed poolMax"},
		{"recycleStrategy not in enum", pl(func(p *v1.Pool) { p.Spec.RecycleStrategy = &v1.RecycleStrategy{Type: "Reuse"} }),
			"spec.recycleStrategy.type", "Unsupported value"},
		{"scale maxUnavailable above 100%", pl(func(p *v1.Pool) {
			p.Spec.ScaleStrategy = &v1.ScaleStrategy{MaxUnavailable: ptr.To(intstr.FromString("150%"))}
		}), "spec.scaleStrategy.maxUnavailable", "percentage from 0% to 100%"},
		{"scale maxUnavailable below 0", pl(func(p *v1.Pool) {
			p.Spec.ScaleStrategy = &v1.ScaleStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(-1))}
		}), "spec.scaleStrategy.maxUnavailable", "number >= 0"},
		{"update maxUnavailable not a number or percentage", pl(func(p *v1.Pool) {
			p.Spec.UpdateStrategy = &v1.UpdateStrategy{MaxUnavailable: ptr.To(intstr.FromString("half"))}
		}), "spec.updateStrategy.maxUnavailable", "percentage from 0% to 100%"},

		{"snapshot without sandboxName", func(ns string) client.Object { s := snapshot(ns, "bad"); s.Spec.SandboxName = ""; return s },
			"spec.sandboxName", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := env.Client.Create(ctxFor(t), tc.obj(ns))
			wantInvalid(t, err, tc.field, tc.text)
		})
	}

	t.Run("template container without name", func(t *testing.T) {
		// A Go client always sends "name"; leave it out in JSON.
		u := `{"apiVersion":"sandbox.opensandbox.io/v1alpha1","kind":"BatchSandbox","metadata":{"name":"bad","namespace":"` + ns + `"},` +
			`"spec":{"template":{"spec":{"containers":[{"image":"opensandbox/base:latest"}]}}}}`
		wantInvalid(t, env.Client.Create(ctxFor(t), rawObject(t, u)), "spec.template.spec.containers[0].name", "Required value")
	})
	t.Run("pool without template", func(t *testing.T) {
		u := `{"apiVersion":"sandbox.opensandbox.io/v1alpha1","kind":"Pool","metadata":{"name":"bad","namespace":"` + ns + `"},` +
			`"spec":{"capacitySpec":{"bufferMin":0,"bufferMax":1,"poolMin":0,"poolMax":1}}}`
		wantInvalid(t, env.Client.Create(ctxFor(t), rawObject(t, u)), "spec.template", "Required value")
	})
	t.Run("capacitySpec field missing", func(t *testing.T) {
		// An int32 field cannot be left out from Go, so send the JSON.
		u := `{"apiVersion":"sandbox.opensandbox.io/v1alpha1","kind":"Pool","metadata":{"name":"bad","namespace":"` + ns + `"},` +
			`"spec":{"template":{"spec":{"containers":[{"name":"c","image":"i"}]}},"capacitySpec":{"bufferMin":0,"bufferMax":1,"poolMin":0}}}`
		err := env.Client.Create(ctxFor(t), rawObject(t, u))
		wantInvalid(t, err, "spec.capacitySpec.poolMax", "Required value")
	})
}

// testRefusedUpdates covers the rules that apply to updates: status enums
// (through the status subresource) and the immutable snapshot sandboxName.
func testRefusedUpdates(t *testing.T, env *kubetest.Env) {
	ctx, c, ns := ctxFor(t), env.Client, env.Namespace(t)

	b := batch(ns, "phase")
	if err := c.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	b.Status.Phase = "Running"
	wantInvalid(t, c.Status().Update(ctx, b), "status.phase", "Unsupported value")

	// A batch keeps its mode and pool: the pods it holds belong to it.
	for _, change := range []struct {
		name string
		mut  func(*v1.BatchSandbox)
	}{
		{"pool changed", func(b *v1.BatchSandbox) { b.Spec.PoolRef = "other" }},
		{"pool removed", func(b *v1.BatchSandbox) { b.Spec.PoolRef = "" }},
	} {
		pb := batch(ns, "pooled-"+strings.ReplaceAll(change.name, " ", "-"))
		pb.Spec.Template, pb.Spec.PoolRef = nil, "warm"
		if change.name == "pool removed" {
			// "*" with a template, so that dropping poolRef leaves a valid template-mode spec.
			pb.Spec.Template, pb.Spec.PoolRef = batch(ns, "x").Spec.Template, "*"
		}
		if err := c.Create(ctx, pb); err != nil {
			t.Fatal(err)
		}
		change.mut(pb)
		wantInvalid(t, c.Update(ctx, pb), "spec.poolRef", "cannot be set, removed or changed")
	}
	tb := batch(ns, "templated")
	if err := c.Create(ctx, tb); err != nil {
		t.Fatal(err)
	}
	tb.Spec.PoolRef = "*"
	wantInvalid(t, c.Update(ctx, tb), "spec.poolRef", "cannot be set, removed or changed")

	s := snapshot(ns, "immutable")
	if err := c.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	s.Status.Phase = "Done"
	wantInvalid(t, c.Status().Update(ctx, s), "status.phase", "Unsupported value")

	if err := c.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
		t.Fatal(err)
	}
	s.Spec.SandboxName = "other"
	wantInvalid(t, c.Update(ctx, s), "spec.sandboxName", "sandboxName cannot be changed")
}

func rawObject(t *testing.T, js string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(js)); err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return u
}

// wantInvalid checks that err is the apiserver's Invalid error with a cause
// for field whose message contains text, and that the error's text names
// the field.
func wantInvalid(t *testing.T, err error, field, text string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want refused naming %s", field)
	}
	var se *apierrors.StatusError
	if !apierrors.IsInvalid(err) || !errors.As(err, &se) || se.ErrStatus.Details == nil {
		t.Fatalf("error = %v; want an Invalid error naming %s", err, field)
	}
	if !strings.Contains(err.Error(), field) {
		t.Errorf("error %q does not name %s", err, field)
	}
	for _, cause := range se.ErrStatus.Details.Causes {
		if cause.Field == field && strings.Contains(cause.Message, text) {
			return
		}
	}
	t.Errorf("no cause for %s containing %q; causes: %+v", field, text, se.ErrStatus.Details.Causes)
}
