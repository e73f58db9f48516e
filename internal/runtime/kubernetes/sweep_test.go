package kubernetes

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

func TestSweep(t *testing.T) {
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	old := metav1.NewTime(time.Now().Add(-time.Hour))
	secret := func(name, id string, created metav1.Time, owned bool) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{labelID: id}, CreationTimestamp: created}}
		if owned {
			s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "BatchSandbox", Name: id, UID: "u"}}
		}
		return s
	}
	cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		secret("orphan", "orphan", old, false),        // no sandbox, old: swept
		secret("young", "young", metav1.Now(), false), // a create in progress: kept
		secret("owned", "owned", old, true),           // the garbage collector's: kept
		secret("live", "live", old, false),            // its sandbox exists: kept
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "ns", CreationTimestamp: old}}, // not ours: kept
		&sandboxv1alpha1.BatchSandbox{ObjectMeta: metav1.ObjectMeta{Name: "live", Namespace: "ns", Labels: map[string]string{labelID: "live"}}},
	).Build()
	r := &Runtime{opts: Options{}.withDefaults(), ns: "ns", cached: cl, api: cl, log: slog.New(slog.DiscardHandler)}
	r.Sweep(context.Background())
	var list corev1.SecretList
	if err := cl.List(context.Background(), &list, client.InNamespace("ns")); err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, s := range list.Items {
		left = append(left, s.Name)
	}
	slices.Sort(left)
	if want := []string{"live", "other", "owned", "young"}; !slices.Equal(left, want) {
		t.Errorf("after Sweep: %q, want %q", left, want)
	}
}
