package docker

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func TestLabelsRoundTrip(t *testing.T) {
	r := &Runtime{opts: Options{Labels: map[string]string{"team": "a"}}}
	exp := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	created := time.Date(2029, 1, 1, 0, 0, 0, 7, time.UTC)
	spec := runtime.Spec{
		ID: "abc", Image: "debian:12", Entrypoint: []string{"sh", "-c", "a, b"},
		Metadata: map[string]string{"k": "v", "empty": "", "id": "user-id"}, ExpiresAt: &exp,
		Platform: &runtime.Platform{OS: "linux", Arch: "arm64"}, ExecdToken: "t",
	}
	labels := r.specLabels(spec, created, "", []string{"v1", "v2"})
	// The image (say, a snapshot of another sandbox) carries our labels.
	maskInherited(labels, map[string]string{
		labelMetadataPrefix + "old": "x", labelManagedVolumes + "x": "y", labelManualCleanup: "true",
		labelID: "other", "maintainer": "someone",
	})
	sb := sandboxFromLabels(newLabelView(labels))
	want := runtime.Sandbox{
		ID: "abc", Image: "debian:12", Entrypoint: spec.Entrypoint, Metadata: spec.Metadata,
		Platform: spec.Platform, ExecdToken: "t", ExpiresAt: &exp, CreatedAt: created,
	}
	if !reflect.DeepEqual(sb, want) {
		t.Errorf("round trip = %+v\nwant %+v", sb, want)
	}
	if got := newLabelView(labels).managedVolumes(); !reflect.DeepEqual(got, []string{"v1", "v2"}) {
		t.Errorf("managed volumes = %q", got)
	}
	if _, ok := newLabelView(labels).get(labelManualCleanup); ok {
		t.Errorf("inherited manual-cleanup label not masked: %v", labels)
	}
	if !r.owns(labels, "abc") || r.owns(labels, "abd") || (&Runtime{opts: Options{Labels: map[string]string{"team": "b"}}}).owns(labels, "abc") {
		t.Errorf("owns is wrong for labels %v", labels)
	}
}

func TestStateOf(t *testing.T) {
	at := "2030-01-02T03:04:05.123456789Z"
	for _, tc := range []struct {
		s                     container.State
		state, reason, inText string
	}{
		{container.State{Status: "running", Running: true, StartedAt: at}, sandbox.StateRunning, "CONTAINER_RUNNING", ""},
		{container.State{Status: "paused", Running: true, Paused: true}, sandbox.StatePaused, "CONTAINER_PAUSED", ""},
		{container.State{Status: "restarting", Running: true, Restarting: true}, sandbox.StateRunning, "CONTAINER_RESTARTING", ""},
		{container.State{Status: "created"}, sandbox.StatePending, "CONTAINER_STARTING", ""},
		{container.State{Status: "exited", FinishedAt: at}, sandbox.StateTerminated, "CONTAINER_EXITED", ""},
		{container.State{Status: "exited", ExitCode: 2, Error: "boom", FinishedAt: at}, sandbox.StateFailed, "CONTAINER_EXITED_ERROR", "code 2: boom"},
		{container.State{Status: "exited", ExitCode: 137, OOMKilled: true}, sandbox.StateFailed, "CONTAINER_EXITED_ERROR", "out of memory"},
		{container.State{Status: "dead", Dead: true, ExitCode: 1}, sandbox.StateFailed, "CONTAINER_DEAD", "code 1"},
		{container.State{Status: "removing"}, sandbox.StateStopping, "CONTAINER_REMOVING", ""},
	} {
		got := stateOf(&tc.s)
		if got.State != tc.state || got.Reason != tc.reason || !strings.Contains(got.Message, tc.inText) {
			t.Errorf("stateOf(%+v) = %+v, want %s/%s with %q", tc.s, got, tc.state, tc.reason, tc.inText)
		}
		if (tc.s.StartedAt == at || tc.s.FinishedAt == at) && got.At.IsZero() {
			t.Errorf("stateOf(%+v): no transition time", tc.s)
		}
	}
}

func TestClassOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want error
	}{
		{cerrdefs.ErrNotFound, runtime.ErrNotFound},
		{cerrdefs.ErrConflict, runtime.ErrConflict},
		{cerrdefs.ErrInvalidArgument, runtime.ErrInvalid},
		{cerrdefs.ErrUnavailable, runtime.ErrUnavailable},
		{errors.New("other"), nil},
	} {
		err := engineErr(fmt.Errorf("engine: %w", tc.err), "docker: sandbox x")
		if tc.want != nil && !errors.Is(err, tc.want) || !errors.Is(err, tc.err) || !strings.HasPrefix(err.Error(), "docker: sandbox x: engine: ") {
			t.Errorf("engineErr(%v) = %v, want class %v", tc.err, err, tc.want)
		}
	}
}

func TestTailBuffer(t *testing.T) {
	b := tailBuffer{max: 5}
	for _, s := range []string{"ab", "cd", "efg", "0123456789", "x"} {
		b.Write([]byte(s))
	}
	if got := b.String(); got != "6789x" {
		t.Errorf("tail = %q, want %q", got, "6789x")
	}
}

func TestRedactInspect(t *testing.T) {
	raw := `{"Id":"c","Config":{"Env":["A=1","EXECD_ACCESS_TOKEN=secret"],"Labels":{"opensandbox.io/execd-token":"secret","opensandbox.io/egress-auth-token":"secret","x":"y"}},"HostConfig":{"Memory":1234567890123}}`
	out, err := redactInspect([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "secret") || !strings.Contains(string(out), "1234567890123") {
		t.Errorf("redacted = %s", out)
	}
	var doc map[string]any
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Errorf("redacted output is not JSON: %v", err)
	}
}
