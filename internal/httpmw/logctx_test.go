package httpmw

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

func TestContextHandler(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(ContextHandler(ContextHandler(slog.NewTextHandler(&buf, nil))))
	ctx := WithRequestID(context.Background(), "rid-7")

	log.InfoContext(ctx, "from a driver", "sandbox", "sb1")
	log.Info("no context")
	log.With(RequestIDKey, "rid-7").InfoContext(ctx, "own id")
	log.WithGroup("g").InfoContext(ctx, "grouped")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("logged %d lines, want 4:\n%s", len(lines), buf.String())
	}
	for i, want := range []int{1, 0, 1, 1} {
		if got := strings.Count(lines[i], "request_id=rid-7"); got != want {
			t.Errorf("line %q has request_id %d times, want %d", lines[i], got, want)
		}
	}
}
