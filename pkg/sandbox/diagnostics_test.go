package sandbox

import (
	"net/http"
	"testing"
)

func TestDiagnostics(t *testing.T) {
	s := newSDKServer(t)
	s.mux.HandleFunc("GET /v1/sandboxes/sb1/diagnostics/{kind}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte(r.PathValue("kind") + "?" + r.URL.RawQuery))
	})
	c := s.client(t)
	ctx := testCtx(t)
	for _, tc := range []struct {
		name string
		call func() (string, error)
		want string
	}{
		{"logs", func() (string, error) { return c.DiagnosticLogs(ctx, "sb1", DiagnosticsOptions{Tail: 5, Since: "10m"}) }, "logs?since=10m&tail=5"},
		{"events", func() (string, error) { return c.DiagnosticEvents(ctx, "sb1", DiagnosticsOptions{Limit: 7}) }, "events?limit=7"},
		{"inspect", func() (string, error) { return c.DiagnosticInspect(ctx, "sb1") }, "inspect?"},
		{"summary", func() (string, error) {
			return c.DiagnosticSummary(ctx, "sb1", DiagnosticsOptions{Tail: 3, EventLimit: 4})
		}, "summary?event_limit=4&tail=3"},
	} {
		got, err := tc.call()
		if err != nil || got != tc.want {
			t.Errorf("%s = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}
