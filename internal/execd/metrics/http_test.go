package metrics

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func watchFixture(t *testing.T, interval time.Duration) *Collector {
	t.Helper()
	f := newFixture(t, map[string]string{
		"proc/self/cgroup":          "0::/\n",
		"cgroup/cgroup.controllers": "cpu memory\n",
		"cgroup/cpu.max":            "100000 100000\n",
		"cgroup/cpu.stat":           "usage_usec 0\n",
		"cgroup/memory.max":         "1073741824\n",
		"cgroup/memory.current":     "536870912\n",
	})
	c, err := New(Options{CgroupRoot: f.cgroup, ProcRoot: f.proc, Interval: interval})
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	return c
}

func TestGet(t *testing.T) {
	c := watchFixture(t, time.Second)
	rec := httptest.NewRecorder()
	c.Get(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics status = %d, want 200; body %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("GET /metrics Content-Type = %q, want application/json", ct)
	}
	var m sandbox.Metrics
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatalf("GET /metrics body %q: %v", rec.Body, err)
	}
	if m.CPUCount != 1 || m.MemTotalMiB != 1024 || m.MemUsedMiB != 512 || m.Timestamp == 0 {
		t.Errorf("GET /metrics = %+v, want cpu_count 1, mem_total_mib 1024, mem_used_mib 512, timestamp set", m)
	}
}

func TestGetSampleError(t *testing.T) {
	f := newFixture(t, map[string]string{
		"proc/self/cgroup":          "0::/\n",
		"cgroup/cgroup.controllers": "cpu memory\n",
		"cgroup/cpu.stat":           "usage_usec 0\n",
	})
	c := f.new()
	f.write("cgroup/memory.max", "nonsense\n")
	rec := httptest.NewRecorder()
	c.Get(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	var body struct{ Code, Message string }
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("GET /metrics body %q: %v", rec.Body, err)
	}
	if rec.Code != http.StatusInternalServerError || body.Code != "RUNTIME_ERROR" {
		t.Errorf("GET /metrics with a broken memory.max = %d %+v, want 500 RUNTIME_ERROR", rec.Code, body)
	}
}

func TestWatch(t *testing.T) {
	c := watchFixture(t, 10*time.Millisecond)
	returned := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(returned)
		c.Watch(w, r)
	}))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/metrics/watch", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("GET /metrics/watch: %v", err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("GET /metrics/watch Content-Type = %q, want text/event-stream", ct)
	}
	br := bufio.NewReader(resp.Body)
	var prev int64
	for i := range 3 {
		line, err := br.ReadBytes('\n')
		if err != nil {
			t.Fatalf("reading frame %d: %v", i, err)
		}
		var m sandbox.Metrics
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("frame %d %q: %v", i, line, err)
		}
		if m.MemTotalMiB != 1024 || m.Timestamp < prev {
			t.Errorf("frame %d = %+v, want mem_total_mib 1024 and timestamp >= %d", i, m, prev)
		}
		prev = m.Timestamp
	}

	cancel()
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("Watch did not return after the client went away")
	}
}

func TestCanceledRequestWritesNothing(t *testing.T) {
	c := watchFixture(t, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for name, h := range map[string]http.HandlerFunc{"Get": c.Get, "Watch": c.Watch} {
		rec := httptest.NewRecorder()
		h(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil).WithContext(ctx))
		if rec.Body.Len() != 0 || len(rec.Header()) != 0 {
			t.Errorf("%s with a canceled request wrote headers %v body %q, want nothing", name, rec.Header(), rec.Body)
		}
	}
}
