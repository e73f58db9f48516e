package docker

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

func TestPingAndLiveRestore(t *testing.T) {
	r := newTestRuntime(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Ping(ctx); err != nil {
		t.Errorf("Ping of a running engine: %v", err)
	}
	on, err := r.LiveRestore(ctx)
	if err != nil {
		t.Fatalf("LiveRestore: %v", err)
	}
	want := dockerOut("info", "--format", "{{.LiveRestoreEnabled}}") == "true"
	if on != want {
		t.Errorf("LiveRestore = %v; docker info says %v", on, want)
	}

	// The same Runtime whose engine is gone: every failure is ErrUnavailable.
	cli, err := client.NewClientWithOpts(client.WithHost("unix://"+filepath.Join(t.TempDir(), "gone.sock")), client.WithVersion("1.41"))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	gone := &Runtime{cli: cli, opts: r.opts, log: r.log}
	wantClass(t, "Ping of a missing engine", gone.Ping(ctx), runtime.ErrUnavailable)
	_, err = gone.LiveRestore(ctx)
	wantClass(t, "LiveRestore of a missing engine", err, runtime.ErrUnavailable)
	_, err = gone.List(ctx)
	wantClass(t, "List of a missing engine", err, runtime.ErrUnavailable)
}

func TestPublishedPortRange(t *testing.T) {
	r := newTestRuntime(t, func(o *Options) { o.PublishedPortRange = "20000-32767" })
	spec := baseSpec(t)
	mustCreate(t, r, spec)
	for _, port := range []int{44772, 8080} {
		a, err := r.Address(testCtx(t), spec.ID, port)
		if err != nil {
			t.Fatalf("Address(%d): %v", port, err)
		}
		if a.Port < 20000 || a.Port > 32767 {
			t.Errorf("port %d is published on host port %d; want 20000-32767", port, a.Port)
		}
	}
	for _, bad := range []string{"30000", "0-10", "5-4", "1-70000"} {
		o := Options{ExecdPath: env.execd, PublishedPortRange: bad}
		wantClass(t, "setDefaults with published port range "+bad, o.setDefaults(), runtime.ErrInvalid)
	}
}
