package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// Metrics returns a resource usage sample of the sandbox's cgroup.
func (s *Sandbox) Metrics(ctx context.Context) (Metrics, error) {
	var m Metrics
	_, err := s.c.do(ctx, s.execdCall(http.MethodGet, "/metrics"), &m)
	return m, wrap(err, "metrics")
}

// WatchMetrics streams a sample about once a second (the first at once) to
// fn until ctx ends (it returns ctx's error), fn returns an error (returned
// as is) or the stream fails.
func (s *Sandbox) WatchMetrics(ctx context.Context, fn func(Metrics) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cl := s.execdCall(http.MethodGet, "/metrics/watch")
	cl.stream = true
	cl.header.Set("Accept", "text/event-stream")
	resp, err := s.c.send(ctx, cl)
	if err != nil {
		return wrap(err, "watch metrics")
	}
	defer resp.Body.Close()
	// One JSON object per line; "data: {...}" SSE framing is accepted too.
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		line = bytes.TrimSpace(bytes.TrimPrefix(line, []byte("data:")))
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var m Metrics
		if err := json.Unmarshal(line, &m); err != nil {
			return fmt.Errorf("watch metrics: decode %q: %w", truncate(line, 200), err)
		}
		if err := fn(m); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("watch metrics: %w", err)
	}
	return fmt.Errorf("watch metrics: stream ended: %w", io.ErrUnexpectedEOF)
}
