package httpmetrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func mux() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("POST /things/{id}", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusCreated)
		w.Write(b)
	})
	m.HandleFunc("GET /cut", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("half"))
		panic(http.ErrAbortHandler)
	})
	m.HandleFunc("GET /early", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusEarlyHints)
		w.Write([]byte("x"))
	})
	return m
}

func serve(t *testing.T, h http.Handler, method, path, body string) {
	t.Helper()
	defer func() {
		if v := recover(); v != nil && v != http.ErrAbortHandler {
			t.Fatalf("panic %v", v)
		}
	}()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(method, path, strings.NewReader(body)))
}

// Requests are labelled by route pattern (ids in paths do not multiply
// series), method when asked, and code; a cut reply is "aborted" and the
// panic goes on; body bytes are counted when asked.
func TestMiddleware(t *testing.T) {
	m := New(Options{Namespace: "t", Method: true, BodyBytes: true})
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.Collectors()...)
	h := m.Middleware(mux())
	serve(t, h, "POST", "/things/a", "12345")
	serve(t, h, "POST", "/things/b", "123")
	serve(t, h, "GET", "/nowhere", "")
	serve(t, h, "GET", "/cut", "")
	serve(t, h, "GET", "/early", "")
	for _, c := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"POST /things/{id}", "POST", "201"}, 2},
		{[]string{"unmatched", "GET", "404"}, 1},
		{[]string{"GET /cut", "GET", "aborted"}, 1},
		{[]string{"GET /early", "GET", "200"}, 1},
	} {
		if n := testutil.ToFloat64(m.requests.WithLabelValues(c.labels...)); n != c.want {
			t.Errorf("requests%v = %v, want %v", c.labels, n, c.want)
		}
	}
	if n := testutil.ToFloat64(m.bytesIn.WithLabelValues("POST /things/{id}")); n != 8 {
		t.Errorf("body bytes in = %v, want 8", n)
	}
	if n := testutil.ToFloat64(m.bytesOut.WithLabelValues("GET /cut")); n != 4 {
		t.Errorf("body bytes out of the cut reply = %v, want 4", n)
	}
	if n := testutil.ToFloat64(m.inFlight); n != 0 {
		t.Errorf("in flight after all = %v", n)
	}
	if n := testutil.CollectAndCount(m.duration); n != 4 {
		t.Errorf("%d latency series, want 4 (one per route and method)", n)
	}
}

// Without the options: no method label, no byte counters, and the
// unmatched label as given.
func TestMiddlewarePlain(t *testing.T) {
	m := New(Options{Namespace: "t", Unmatched: "none"})
	if len(m.Collectors()) != 3 {
		t.Fatalf("%d collectors, want 3", len(m.Collectors()))
	}
	h := m.Middleware(mux())
	serve(t, h, "DELETE", "/x", "")
	if n := testutil.ToFloat64(m.requests.WithLabelValues("none", "404")); n != 1 {
		t.Errorf("unmatched requests = %v, want 1", n)
	}
}
