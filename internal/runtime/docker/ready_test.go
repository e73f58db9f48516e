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
