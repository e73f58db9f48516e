package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/openapitest"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func binPath(t *testing.T, name string) string {
	t.Helper()
	if os.Getenv("OSB_E2E") == "" {
		t.Skip("end-to-end test: run with `make e2e` (OSB_E2E=1)")
	}
	dir := os.Getenv("OSB_BIN_DIR")
	if dir == "" {
		dir = openapitest.RepoPath("bin")
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("binary %s not built (make build): %v", p, err)
	}
	return p
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// execdProc is a running execd binary.
type execdProc struct {
	cmd    *exec.Cmd
	base   string
	client *http.Client
	token  string
	// apiKey goes on every request when set (the server proxy needs it).
	apiKey string
	exited chan struct{}
	err    error
}

type execdOpts struct {
	args       []string
	entrypoint []string
	env        []string
	cred       *syscall.Credential
	dir        string
}

func startExecd(t *testing.T, o execdOpts) *execdProc {
	t.Helper()
	addr := freeAddr(t)
	args := append([]string{"--addr", addr, "--log-level", "7"}, o.args...)
	if len(o.entrypoint) > 0 {
		args = append(append(args, "--"), o.entrypoint...)
	}
	cmd := exec.Command(binPath(t, "execd"), args...)
	cmd.Env = append(os.Environ(), o.env...)
	cmd.Dir = o.dir
	logf, err := os.Create(filepath.Join(t.TempDir(), "execd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: o.cred}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start execd: %v", err)
	}
	p := &execdProc{cmd: cmd, base: "http://" + addr, exited: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("execd log:\n%s", b)
		}
		logf.Close()
	})
	spec := openapitest.Load(t, "api/execd.yaml")
	p.client = &http.Client{Transport: spec.Transport(t, &tokenTransport{p: p})}
	// Ready when /ping answers; the process has no other readiness signal.
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := p.do(context.Background(), http.MethodGet, "/ping", "", nil)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 || resp.StatusCode == 401 {
				return p
			}
		}
		select {
		case <-p.exited:
			t.Fatalf("execd exited during start: %v", p.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("execd never answered /ping: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type tokenTransport struct{ p *execdProc }

func (tt *tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if tt.p.token != "" && r.Header.Get(sandbox.AccessTokenHeader) == "" {
		r = r.Clone(r.Context())
		r.Header.Set(sandbox.AccessTokenHeader, tt.p.token)
	}
	if tt.p.apiKey != "" {
		r = r.Clone(r.Context())
		r.Header.Set(sandbox.APIKeyHeader, tt.p.apiKey)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (p *execdProc) do(ctx context.Context, method, path, contentType string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, p.base+path, body)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return p.client.Do(req)
}

// call sends a JSON request and decodes a JSON reply into out (when not
// nil), failing the test unless the status is want.
func (p *execdProc) call(t *testing.T, method, path string, in any, want int, out any) []byte {
	t.Helper()
	var body io.Reader
	ct := ""
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		body, ct = bytes.NewReader(b), "application/json"
	}
	resp, err := p.do(context.Background(), method, path, ct, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	if resp.StatusCode != want {
		t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, data, want)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: decoding %s: %v", method, path, data, err)
		}
	}
	return data
}

// wantError checks a {code, message} reply.
func (p *execdProc) wantError(t *testing.T, method, path string, in any, status int, code string) {
	t.Helper()
	var er sandbox.ErrorResponse
	p.call(t, method, path, in, status, &er)
	if er.Code != code || er.Message == "" {
		t.Errorf("%s %s error = %+v, want code %s and a message", method, path, er, code)
	}
}

type execution struct {
	events []sandbox.StreamEvent
	stdout []string
	stderr []string
	exit   int
}

// stream posts to a streaming endpoint and reads every event.
func (p *execdProc) stream(t *testing.T, path string, in any) execution {
	t.Helper()
	return p.streamWithin(t, path, in, 60*time.Second)
}

// streamWithin is stream with a time limit of its own.
func (p *execdProc) streamWithin(t *testing.T, path string, in any, limit time.Duration) execution {
	t.Helper()
	b, _ := json.Marshal(in)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	resp, err := p.do(ctx, http.MethodPost, path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		data, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s = %d %s", path, resp.StatusCode, data)
	}
	var ex execution
	er := sandbox.NewEventReader(resp.Body)
	for {
		ev, err := er.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		ex.events = append(ex.events, ev)
		switch ev.Type {
		case sandbox.EventStdout:
			ex.stdout = append(ex.stdout, ev.Text)
		case sandbox.EventStderr:
			ex.stderr = append(ex.stderr, ev.Text)
		case sandbox.EventError:
			ex.exit, err = strconv.Atoi(ev.Error.Value)
			if err != nil {
				ex.exit = -1
			}
		}
	}
	if len(ex.events) == 0 || ex.events[0].Type != sandbox.EventInit {
		t.Fatalf("POST %s: stream %+v does not start with init", path, ex.events)
	}
	return ex
}

func joined(s []string) string { return strings.Join(s, "|") }

func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
