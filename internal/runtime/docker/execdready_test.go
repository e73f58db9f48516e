package docker

import (
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/opensandbox-go/opensandbox/internal/execd/readiness"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// TestCreateWaitsForReadinessLine: Create learns that execd listens from
// execd's readiness line, so it pings execd once, to confirm, instead of
// probing until it answers (the old code pinged right after the start,
// before execd could listen, and again after each delay). The marker
// never reaches the entrypoint nor the commands.
func TestCreateWaitsForReadinessLine(t *testing.T) {
	t.Parallel()
	r := newTestRuntime(t, nil)
	ctx, phases := runtime.WithPhases(testCtx(t))
	spec := baseSpec(t)
	spec.Entrypoint = []string{"sh", "-c", `case "$(env)" in *` + readiness.MarkerEnv + `*) echo "entrypoint env: marker";; *) echo "entrypoint env: clean";; esac; exec sleep 100000`}
	if _, err := r.Create(ctx, spec); err != nil {
		t.Fatalf("Create: %v", err)
	}
	timing := phases.ServerTiming()
	if !strings.Contains(timing, "execd-pings;desc=1") {
		t.Errorf("Server-Timing %q: want exactly one execd ping", timing)
	}
	var names []string
	for _, s := range phases.Steps() {
		names = append(names, s.Name)
	}
	if got, want := strings.Join(names, ","), "image,volumes,network,create,attach,start,ready,inspect"; got != want {
		t.Errorf("steps %s, want %s", got, want)
	}
	if res := run(t, r, spec.ID, spec.ExecdToken, "env"); strings.Contains(strings.Join(res.stdout, ""), readiness.MarkerEnv) {
		t.Errorf("a command sees %s: %q", readiness.MarkerEnv, res.stdout)
	}
	if logs := dockerOut("logs", containerName(spec.ID)); !strings.Contains(logs, "entrypoint env: clean") {
		t.Errorf("the entrypoint saw the marker, or did not run; logs:\n%s", logs)
	}
}

// TestCreateCountsEngineRequests: a client made with CountEngineRequests
// counts each engine request of a create in its Phases.
func TestCreateCountsEngineRequests(t *testing.T) {
	t.Parallel()
	needEngine(t)
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation(), CountEngineRequests())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	r := newTestRuntime(t, func(o *Options) { o.Client = cli })
	ctx, phases := runtime.WithPhases(testCtx(t))
	spec := baseSpec(t)
	if _, err := r.Create(ctx, spec); err != nil {
		t.Fatalf("Create: %v", err)
	}
	// image inspect, container create, attach, start, inspect before the
	// ping, inspect of the result: at least six.
	if n := phases.EngineRequests(); n < 6 {
		t.Errorf("%d engine requests counted, want at least 6 (%s)", n, phases.ServerTiming())
	}
	for _, s := range phases.Steps() {
		if (s.Name == "create" || s.Name == "start") && s.Engine != 1 {
			t.Errorf("step %s made %d engine requests, want 1", s.Name, s.Engine)
		}
	}
}

// TestReadyWatch: the watch reports the line when the container writes
// it to stderr, and reports its absence when the container exits
// without it (stdout is not execd's and is not read).
func TestReadyWatch(t *testing.T) {
	t.Parallel()
	r := newTestRuntime(t, nil)
	ctx := testCtx(t)
	for _, c := range []struct {
		name, script string
		want         bool
	}{
		{"stderr", `printf 'noise\n' >&2; printf '` + strings.TrimSuffix(readiness.Line("m1"), "\n") + `\n' >&2; sleep 100000`, true},
		{"stdout", `printf '` + strings.TrimSuffix(readiness.Line("m1"), "\n") + `\n'; exit 0`, false},
		{"other marker", `printf '` + strings.TrimSuffix(readiness.Line("m2"), "\n") + `\n' >&2; exit 0`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := newID(t)
			created, err := r.cli.ContainerCreate(ctx, &container.Config{
				Image: env.image, Entrypoint: []string{"sh", "-c", c.script},
				Labels: map[string]string{testLabelKey: testLabelVal, runLabelKey: env.run},
			}, &container.HostConfig{NetworkMode: "none"}, nil, nil, containerName(id))
			if err != nil {
				t.Fatal(err)
			}
			w := r.watchReady(ctx, created.ID, "m1")
			if w == nil {
				t.Fatal("attach failed")
			}
			defer w.stop()
			if err := r.cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
				t.Fatal(err)
			}
			if got := w.wait(ctx); got != c.want {
				t.Errorf("wait = %v, want %v", got, c.want)
			}
			if ctx.Err() != nil {
				t.Errorf("the watch ended with the test's context, not with the container's output")
			}
		})
	}
}
