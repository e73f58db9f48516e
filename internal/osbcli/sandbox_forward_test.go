package osbcli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// fakeForwardServer is a lifecycle server whose sandbox "fw-1" has port
// 6080 at /port6080 on the same server; that route answers only requests
// carrying the endpoint's token, with the path and query it saw.
func fakeForwardServer(t *testing.T) map[string]string {
	t.Helper()
	var srv *httptest.Server
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/fw-1/endpoints/6080", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(sandbox.Endpoint{
			Endpoint: strings.TrimPrefix(srv.URL, "http://") + "/port6080",
			Headers:  map[string]string{sandbox.AccessTokenHeader: "tok-fw"},
		})
	})
	mux.HandleFunc("GET /v1/sandboxes/nope/endpoints/6080", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"code":"SANDBOX_NOT_FOUND","message":"sandbox nope not found"}`)
	})
	mux.HandleFunc("/port6080/", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(sandbox.AccessTokenHeader) != "tok-fw" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		io.WriteString(w, "served "+strings.TrimPrefix(r.URL.Path, "/port6080")+"?"+r.URL.RawQuery)
	})
	srv = httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return map[string]string{"OPEN_SANDBOX_DOMAIN": strings.TrimPrefix(srv.URL, "http://"), "OPEN_SANDBOX_API_KEY": "k"}
}

// startOSB runs osb in-process until cancel; the first stdout line is
// returned as soon as it is printed, the exit code and stderr once osb
// has returned.
func startOSB(t *testing.T, env map[string]string, args ...string) (line string, cancel func() (code int, stderr string)) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		code := run(ctx, args, stdio{in: strings.NewReader(""), out: pw, err: &errb}, envOf(env), t.TempDir())
		pw.Close()
		done <- code
	}()
	lines := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(pr).ReadString('\n')
		lines <- l
		io.Copy(io.Discard, pr)
	}()
	finish := func() (int, string) {
		stop()
		select {
		case code := <-done:
			return code, errb.String()
		case <-time.After(20 * time.Second):
			t.Fatalf("osb %s did not return after cancel", strings.Join(args, " "))
			return 0, ""
		}
	}
	select {
	case line = <-lines:
	case <-time.After(20 * time.Second):
		finish()
		t.Fatalf("osb %s printed no line", strings.Join(args, " "))
	}
	return line, finish
}

func TestSandboxForward(t *testing.T) {
	env := fakeForwardServer(t)
	line, finish := startOSB(t, env, "sandbox", "forward", "fw-1", "-p", "6080")
	fields := strings.Fields(line)
	if len(fields) != 7 || strings.Join(append([]string{fields[0]}, fields[2:]...), " ") != "forwarding -> sandbox fw-1 port 6080" ||
		!strings.HasPrefix(fields[1], "http://127.0.0.1:") || !strings.HasSuffix(line, "\n") {
		finish()
		t.Fatalf("osb sandbox forward printed %q, want \"forwarding http://127.0.0.1:<port> -> sandbox fw-1 port 6080\\n\"", line)
	}
	url := fields[1]
	resp, err := http.Get(url + "/vnc.html?autoconnect=1")
	if err != nil {
		finish()
		t.Fatalf("GET through the forwarder: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "served /vnc.html?autoconnect=1" {
		t.Errorf("GET %s/vnc.html?autoconnect=1: %d %q, want 200 \"served /vnc.html?autoconnect=1\"", url, resp.StatusCode, b)
	}
	if code, errs := finish(); code != 0 {
		t.Errorf("osb sandbox forward after interrupt: exit %d, stderr %q; want 0", code, errs)
	}
	if _, err := http.Get(url + "/"); err == nil {
		t.Errorf("%s still answers after osb returned", url)
	}
}

func TestSandboxForwardJSON(t *testing.T) {
	env := fakeForwardServer(t)
	line, finish := startOSB(t, env, "sandbox", "forward", "fw-1", "-p", "6080", "-o", "json")
	defer finish()
	var info forwardInfo
	if err := json.Unmarshal([]byte(line), &info); err != nil || info.SandboxID != "fw-1" || info.Port != 6080 || !strings.HasPrefix(info.URL, "http://127.0.0.1:") {
		t.Errorf("osb sandbox forward -o json printed %q (%v), want one JSON line with url, sandboxId fw-1, port 6080", line, err)
	}
	if !strings.HasSuffix(info.Target, "/port6080") {
		t.Errorf("target %q, want the endpoint URL", info.Target)
	}
}

func TestSandboxForwardErrors(t *testing.T) {
	env := fakeForwardServer(t)
	tests := []struct {
		name string
		args []string
		code int
		want string // in stderr
	}{
		{"no port", []string{"sandbox", "forward", "fw-1"}, 1, `"port" not set`}, // as every required flag (cobra checks it after setup)
		{"bad port", []string{"sandbox", "forward", "fw-1", "-p", "70000"}, 2, "--port 70000"},
		{"every interface", []string{"sandbox", "forward", "fw-1", "-p", "6080", "--listen", "0.0.0.0:0"}, 2, "--allow-remote"},
		{"unknown sandbox", []string{"sandbox", "forward", "nope", "-p", "6080"}, 1, "osb sandbox list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runOSBIn(t, "", env, tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Errorf("osb %s: exit %d, stderr %q; want %d and %q", strings.Join(tt.args, " "), code, stderr, tt.code, tt.want)
			}
		})
	}
}
