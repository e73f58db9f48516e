package metrics

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A nil *Metrics records nothing and never panics, so lifecycle code can
// call it unconditionally.
func TestNilMetrics(t *testing.T) {
	var m *Metrics
	m.ObserveCreate(time.Second, nil)
	m.ObserveDelete("user_delete", time.Second, errors.New("x"))
	m.EngineError("op")
	m.ExpiryAction(ExpiryDeleted)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	if got := m.Instrument(h); got == nil {
		t.Fatal("Instrument on nil returned nil")
	}
}

func TestInstrumentLabelsByPattern(t *testing.T) {
	m := New(func(context.Context) (map[string]int, error) { return nil, errors.New("engine down") })
	mux := http.NewServeMux()
	mux.HandleFunc("GET /things/{id}", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	h := m.Instrument(mux)
	for _, p := range []string{"/things/a", "/things/b", "/nowhere"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", p, nil))
	}
	if n := testutil.ToFloat64(m.http.Requests().WithLabelValues("GET /things/{id}", "GET", "418")); n != 2 {
		t.Errorf("requests for the pattern = %v, want 2", n)
	}
	if n := testutil.ToFloat64(m.http.Requests().WithLabelValues("unmatched", "GET", "404")); n != 1 {
		t.Errorf("unmatched requests = %v, want 1", n)
	}
	// A failing state count is counted, not fatal to the scrape.
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "opensandbox_sandboxes_scrape_errors_total 1") {
		t.Errorf("scrape with a failing state count = %d:\n%s", rec.Code, rec.Body.String())
	}
}
