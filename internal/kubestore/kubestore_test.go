package kubestore

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opensandbox-go/opensandbox/internal/kubetest"
	"github.com/opensandbox-go/opensandbox/internal/lifecycle"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// These tests run on a real apiserver and etcd (internal/kubetest).

func newBatch(t *testing.T, env *kubetest.Env, ns, name string, expire time.Time) {
	t.Helper()
	bs := &sandboxv1alpha1.BatchSandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: sandboxv1alpha1.BatchSandboxSpec{
			Replicas: ptr.To(int32(1)), PoolRef: "somepool",
			ExpireTime: &metav1.Time{Time: expire},
		},
	}
	if err := env.Client.Create(context.Background(), bs); err != nil {
		t.Fatalf("create BatchSandbox %s: %v", name, err)
	}
}

// startCache is an informer cache of ns, as the runtime driver keeps one.
func startCache(t *testing.T, env *kubetest.Env, ns string) cache.Cache {
	t.Helper()
	c, err := cache.New(env.Config, cache.Options{Scheme: env.Scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("cache: %v", err)
		}
	})
	// Start the BatchSandbox informer now and wait for it.
	if _, err := c.GetInformer(ctx, &sandboxv1alpha1.BatchSandbox{}); err != nil {
		t.Fatal(err)
	}
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	return c
}

func newStore(t *testing.T, env *kubetest.Env, ns, owner string, r client.Reader, now func() time.Time) *Store {
	t.Helper()
	s, err := New(Options{Client: env.Client, Reader: r, Namespace: ns, Owner: owner, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestKubeStore(t *testing.T) {
	env := kubetest.Start(t)
	ctx := context.Background()

	t.Run("overrides are shared, renew moves expireTime, reads see own writes", func(t *testing.T) {
		ns := env.Namespace(t)
		old := time.Now().Add(time.Minute).UTC().Truncate(time.Second)
		newBatch(t, env, ns, "sb-1", old)
		// Two replicas, each reading through its own cache.
		a := newStore(t, env, ns, "replica-a", startCache(t, env, ns), nil)
		b := newStore(t, env, ns, "replica-b", startCache(t, env, ns), nil)

		o, err := a.GetOverrides(ctx, "sb-1")
		if err != nil || o.ExpiresAt != nil || o.Metadata != nil {
			t.Fatalf("overrides of a fresh sandbox: %+v, %v", o, err)
		}
		renewed := old.Add(time.Hour)
		want := lifecycle.Overrides{ExpiresAt: &renewed, Metadata: map[string]string{}}
		if err := a.PutOverrides(ctx, "sb-1", want); err != nil {
			t.Fatal(err)
		}
		// Replica a reads its own write at once, through its cache.
		got, err := a.GetOverrides(ctx, "sb-1")
		if err != nil || got.ExpiresAt == nil || !got.ExpiresAt.Equal(renewed) || got.Metadata == nil {
			t.Fatalf("a reads %+v, %v; want %+v (an emptied metadata map stays non-nil)", got, err, want)
		}
		// The operator's deadline moved with the renew.
		var bs sandboxv1alpha1.BatchSandbox
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "sb-1"}, &bs); err != nil {
			t.Fatal(err)
		}
		if bs.Spec.ExpireTime == nil || !bs.Spec.ExpireTime.Time.Equal(renewed) {
			t.Errorf("spec.expireTime %v, want the renewed %v", bs.Spec.ExpireTime, renewed)
		}
		// Replica b sees it too (once its cache has it).
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, err := b.GetOverrides(ctx, "sb-1")
			if err == nil && got.ExpiresAt != nil && got.ExpiresAt.Equal(renewed) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica b reads %+v, %v; want the renew made through a", got, err)
			}
			time.Sleep(10 * time.Millisecond)
		}

		if err := a.PutOverrides(ctx, "missing", want); !errors.Is(err, runtime.ErrNotFound) {
			t.Errorf("PutOverrides of a missing sandbox: %v, want ErrNotFound", err)
		}
		if o, err := a.GetOverrides(ctx, "missing"); err != nil || o.ExpiresAt != nil {
			t.Errorf("GetOverrides of a missing sandbox: %+v, %v; want none", o, err)
		}
	})

	t.Run("a renew on one replica survives a metadata patch racing it on another", func(t *testing.T) {
		ns := env.Namespace(t)
		old := time.Now().Add(time.Minute).UTC().Truncate(time.Second)
		newBatch(t, env, ns, "sb-race", old)
		a := newStore(t, env, ns, "replica-a", startCache(t, env, ns), nil)
		b := newStore(t, env, ns, "replica-b", startCache(t, env, ns), nil)
		renewed := old.Add(time.Hour)
		calls := 0
		// b's change runs, then a renews before b writes: b's write
		// conflicts, and b applies its change again to a's result.
		err := b.UpdateOverrides(ctx, "sb-race", func(o *lifecycle.Overrides) error {
			calls++
			if calls == 1 {
				if err := a.UpdateOverrides(ctx, "sb-race", func(o *lifecycle.Overrides) error {
					o.ExpiresAt = &renewed
					return nil
				}); err != nil {
					t.Fatalf("a's renew: %v", err)
				}
			}
			o.Metadata = map[string]string{"patched": "by-b"}
			return nil
		})
		if err != nil || calls != 2 {
			t.Fatalf("b's patch: %v after %d applications, want success after 2", err, calls)
		}
		var bs sandboxv1alpha1.BatchSandbox
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "sb-race"}, &bs); err != nil {
			t.Fatal(err)
		}
		got, err := decodeOverrides(&bs)
		if err != nil || got.ExpiresAt == nil || !got.ExpiresAt.Equal(renewed) || got.Metadata["patched"] != "by-b" ||
			bs.Spec.ExpireTime == nil || !bs.Spec.ExpireTime.Time.Equal(renewed) {
			t.Errorf("after both: overrides %+v (%v), spec.expireTime %v; want a's renew and b's patch", got, err, bs.Spec.ExpireTime)
		}
		// An error of the change aborts the write.
		refused := errors.New("refused")
		if err := b.UpdateOverrides(ctx, "sb-race", func(o *lifecycle.Overrides) error { o.Metadata = nil; return refused }); err != refused {
			t.Errorf("a change that fails: %v, want its error as is", err)
		}
		if o, _ := b.GetOverrides(ctx, "sb-race"); o.Metadata["patched"] != "by-b" {
			t.Errorf("a failed change was written: %+v", o)
		}
	})

	t.Run("snapshot records", func(t *testing.T) {
		ns := env.Namespace(t)
		s := newStore(t, env, ns, "replica-a", nil, nil)
		other := newStore(t, env, ns, "replica-b", nil, nil)
		snap := sandbox.Snapshot{ID: "snap-1", SandboxID: "sb-1", Name: "n", Status: sandbox.SnapshotStatus{State: "Creating"},
			CreatedAt: time.Now().UTC().Truncate(time.Second)}
		if err := s.PutSnapshot(ctx, snap); err != nil {
			t.Fatal(err)
		}
		snap.Status.State = "Ready"
		if err := s.PutSnapshot(ctx, snap); err != nil {
			t.Fatalf("replace: %v", err)
		}
		got, err := other.GetSnapshot(ctx, "snap-1")
		if err != nil || got.Status.State != "Ready" || !got.CreatedAt.Equal(snap.CreatedAt) || got.SandboxID != "sb-1" {
			t.Fatalf("GetSnapshot from the other replica: %+v, %v", got, err)
		}
		all, err := other.ListSnapshots(ctx)
		if err != nil || len(all) != 1 || all[0].ID != "snap-1" {
			t.Fatalf("ListSnapshots: %+v, %v", all, err)
		}
		if err := other.DeleteSnapshot(ctx, "snap-1"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetSnapshot(ctx, "snap-1"); !errors.Is(err, runtime.ErrNotFound) {
			t.Errorf("GetSnapshot after delete: %v, want ErrNotFound", err)
		}
		if err := s.DeleteSnapshot(ctx, "snap-1"); !errors.Is(err, runtime.ErrNotFound) {
			t.Errorf("second DeleteSnapshot: %v, want ErrNotFound", err)
		}
	})

	t.Run("create journal: own entries at once, others' only once abandoned", func(t *testing.T) {
		ns := env.Namespace(t)
		now := time.Now()
		clock := func() time.Time { return now }
		a := newStore(t, env, ns, "replica-a", nil, clock)
		b := newStore(t, env, ns, "replica-b", nil, clock)
		if err := a.RecordCreate(ctx, "sb-a", now); err != nil {
			t.Fatal(err)
		}
		if err := b.RecordCreate(ctx, "sb-b", now); err != nil {
			t.Fatal(err)
		}
		ids := func(s *Store) []string {
			t.Helper()
			m, err := s.PendingCreates(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for id := range m {
				out = append(out, id)
			}
			slices.Sort(out)
			return out
		}
		if got := ids(a); !slices.Equal(got, []string{"sb-a"}) {
			t.Errorf("replica a may settle %v; want only its own entry", got)
		}
		now = now.Add(DefaultAbandonAfter + time.Second)
		if got := ids(a); !slices.Equal(got, []string{"sb-a", "sb-b"}) {
			t.Errorf("after AbandonAfter, replica a may settle %v; want both", got)
		}
		if err := b.ClearCreate(ctx, "sb-b"); err != nil {
			t.Fatal(err)
		}
		if err := b.ClearCreate(ctx, "sb-b"); err != nil {
			t.Errorf("clearing an entry twice: %v", err)
		}
		if got := ids(a); !slices.Equal(got, []string{"sb-a"}) {
			t.Errorf("after clearing sb-b: %v", got)
		}
	})
}

func TestLabelValue(t *testing.T) {
	for in, want := range map[string]string{
		"opensandbox-server-7d9f-abc": "opensandbox-server-7d9f-abc",
		"host:name/x":                 "host-name-x",
		"..":                          "server",
	} {
		if got := labelValue(in); got != want {
			t.Errorf("labelValue(%q) = %q, want %q", in, got, want)
		}
	}
}
