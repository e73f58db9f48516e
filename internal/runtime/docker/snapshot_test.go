package docker

import (
	"reflect"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func TestSnapshot(t *testing.T) {
	t.Parallel()
	r := newTestRuntime(t, nil)
	ctx := testCtx(t)
	src := baseSpec(t)
	src.Metadata = map[string]string{"origin": "source"}
	mustCreate(t, r, src)
	run(t, r, src.ID, src.ExecdToken, "mkdir -p /state && echo kept-in-snapshot > /state/file")

	snap := "snap" + randomHex(6)
	t.Cleanup(func() { env.cli.ImageRemove(ctx, snapshotRef(snap), imageRemoveForce) })
	if err := r.CommitSnapshot(ctx, src.ID, snap); err != nil {
		t.Fatalf("CommitSnapshot: %v", err)
	}
	if sb, err := r.Get(ctx, src.ID); err != nil || sb.State != sandbox.StateRunning {
		t.Errorf("source after commit = %s, %v; want Running (the pause is undone)", sb.State, err)
	}
	img, err := env.cli.ImageInspect(ctx, snapshotRef(snap))
	if err != nil || img.Config.Labels[labelSnapshotOf] != src.ID || img.Config.Labels[testLabelKey] != testLabelVal {
		t.Errorf("snapshot image labels = %v, %v", img.Config.Labels, err)
	}

	dst := baseSpec(t)
	dst.Image = ""
	dst.SnapshotID = snap
	dst.Entrypoint = []string{"sleep", "200000"}
	dst.Metadata = map[string]string{"copy": "yes"}
	got := mustCreate(t, r, dst)
	if got.SnapshotID != snap || got.Image != "" || !reflect.DeepEqual(got.Metadata, dst.Metadata) ||
		!reflect.DeepEqual(got.Entrypoint, dst.Entrypoint) || got.ExpiresAt != nil {
		t.Errorf("sandbox from snapshot = %+v; want snapshot %s, no image, its own metadata, entrypoint and expiry", got, snap)
	}
	if res := run(t, r, dst.ID, dst.ExecdToken, "cat /state/file"); !reflect.DeepEqual(res.stdout, []string{"kept-in-snapshot"}) {
		t.Errorf("file in the new sandbox = %q (stderr %q)", res.stdout, res.stderr)
	}

	wantClass(t, "DeleteSnapshot in use", r.DeleteSnapshot(ctx, snap), runtime.ErrConflict)
	if err := r.Delete(ctx, dst.ID); err != nil {
		t.Fatal(err)
	}
	if err := r.DeleteSnapshot(ctx, snap); err != nil {
		t.Fatalf("DeleteSnapshot: %v", err)
	}
	wantClass(t, "second DeleteSnapshot", r.DeleteSnapshot(ctx, snap), runtime.ErrNotFound)

	missing := baseSpec(t)
	missing.Image, missing.SnapshotID = "", snap
	_, err = r.Create(ctx, missing)
	wantClass(t, "Create from a deleted snapshot", err, runtime.ErrNotFound)
	wantClass(t, "CommitSnapshot of an unknown sandbox", r.CommitSnapshot(ctx, "nosuch"+randomHex(4), "x"+randomHex(4)), runtime.ErrNotFound)
	if err := r.Delete(ctx, src.ID); err != nil {
		t.Fatal(err)
	}
}
