package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// maxLogBytes caps what Logs returns; the newest bytes are kept.
const maxLogBytes = 8 << 20

// Logs returns the container's stdout and stderr interleaved as one text.
// At most the newest 8 MiB are returned.
func (r *Runtime) Logs(ctx context.Context, id string, opts runtime.LogOptions) ([]byte, error) {
	c, err := r.inspect(ctx, id)
	if err != nil {
		return nil, err
	}
	b, err := r.readLogs(ctx, c.ID, opts)
	if err != nil {
		return nil, engineErr(err, "docker: logs of sandbox %s", id)
	}
	return b, nil
}

func (r *Runtime) readLogs(ctx context.Context, containerID string, opts runtime.LogOptions) ([]byte, error) {
	lo := container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: "all"}
	if opts.Tail > 0 {
		lo.Tail = strconv.Itoa(opts.Tail)
	}
	if opts.Since > 0 {
		lo.Since = strconv.FormatInt(time.Now().Add(-opts.Since).Unix(), 10)
	}
	rc, err := r.cli.ContainerLogs(ctx, containerID, lo)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var out tailBuffer
	out.max = maxLogBytes
	// Containers run without a TTY, so the stream is multiplexed.
	if _, err := stdcopy.StdCopy(&out, &out, rc); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// lastLogs returns the last n lines of a container's output for error
// messages, or "" when they cannot be read.
func (r *Runtime) lastLogs(ctx context.Context, containerID string, n int) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	b, err := r.readLogs(ctx, containerID, runtime.LogOptions{Tail: n})
	if err != nil {
		return ""
	}
	return strings.TrimRight(string(b), "\n")
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	bytes.Buffer
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= t.max {
		t.Reset()
		p = p[len(p)-t.max:]
	} else if over := t.Len() + len(p) - t.max; over > 0 {
		t.Next(over)
	}
	t.Buffer.Write(p)
	return n, nil
}

// Inspect returns the engine's description of the sandbox's container as
// JSON, with execd's access token blanked out.
func (r *Runtime) Inspect(ctx context.Context, id string) ([]byte, error) {
	if _, err := r.inspect(ctx, id); err != nil {
		return nil, err
	}
	_, raw, err := r.cli.ContainerInspectWithRaw(ctx, containerName(id), false)
	if err != nil {
		return nil, engineErr(err, "docker: inspect sandbox %s", id)
	}
	return redactInspect(raw)
}

const redacted = "<redacted>"

// redactInspect hides the execd and egress tokens in the labels and the
// execd token in the environment.
func redactInspect(raw []byte) ([]byte, error) {
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("docker: decode inspect output: %w", err)
	}
	if cfg, ok := doc["Config"].(map[string]any); ok {
		if labels, ok := cfg["Labels"].(map[string]any); ok {
			for _, k := range []string{labelExecdToken, labelEgressToken} {
				if _, ok := labels[k]; ok {
					labels[k] = redacted
				}
			}
		}
		if env, ok := cfg["Env"].([]any); ok {
			for i, e := range env {
				if s, ok := e.(string); ok && strings.HasPrefix(s, execdTokenEnv+"=") {
					env[i] = execdTokenEnv + "=" + redacted
				}
			}
		}
	}
	return json.MarshalIndent(doc, "", "  ")
}

// eventAttrs are the event attributes copied into Event.Message; the
// others repeat the container's labels (which hold the execd token).
var eventAttrs = []string{"exitCode", "signal", "execID"}

// Events returns the engine's events for the sandbox's container from
// its creation until now, oldest first; limit > 0 keeps the newest limit.
func (r *Runtime) Events(ctx context.Context, id string, limit int) ([]runtime.Event, error) {
	c, err := r.inspect(ctx, id)
	if err != nil {
		return nil, err
	}
	since := engineTime(c.Created)
	if since.IsZero() {
		since = time.Unix(0, 0)
	}
	now := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the client's reader goroutine on every return
	msgs, errs := r.cli.Events(ctx, events.ListOptions{
		Since:   strconv.FormatInt(since.Add(-time.Second).Unix(), 10),
		Until:   fmt.Sprintf("%d.%09d", now.Unix(), now.Nanosecond()),
		Filters: filters.NewArgs(filters.Arg("type", string(events.ContainerEventType)), filters.Arg("container", c.ID)),
	})
	var out []runtime.Event
	for {
		select {
		case m := <-msgs:
			out = append(out, toEvent(m))
			if limit > 0 && len(out) > 2*limit {
				out = append(out[:0], out[len(out)-limit:]...)
			}
		case err := <-errs:
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, engineErr(err, "docker: events of sandbox %s", id)
			}
			sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
			if limit > 0 && len(out) > limit {
				out = out[len(out)-limit:]
			}
			return out, nil
		}
	}
}

func toEvent(m events.Message) runtime.Event {
	ev := runtime.Event{Action: string(m.Action)}
	if m.TimeNano != 0 {
		ev.Time = time.Unix(0, m.TimeNano).UTC()
	} else {
		ev.Time = time.Unix(m.Time, 0).UTC()
	}
	var parts []string
	for _, k := range eventAttrs {
		if v, ok := m.Actor.Attributes[k]; ok {
			parts = append(parts, k+"="+v)
		}
	}
	ev.Message = strings.Join(parts, " ")
	return ev
}
