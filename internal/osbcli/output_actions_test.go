package osbcli

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// TestEveryCommandTakesOutput walks the whole command tree: every
// command that does something takes -o/--output with upstream's formats,
// prints through app.result or app.streams, and refuses other formats as
// a usage error.
func TestEveryCommandTakesOutput(t *testing.T) {
	root := (&app{}).rootCommand()
	var leaves []*cobra.Command
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if !c.HasSubCommands() && c.HasParent() {
			leaves = append(leaves, c)
		}
	}
	walk(root)
	if len(leaves) < 50 {
		t.Fatalf("found %d commands, want the whole tree (50 or more)", len(leaves))
	}
	for _, c := range leaves {
		path := c.CommandPath()
		if !c.Runnable() {
			t.Errorf("%s: a leaf command that cannot run", path)
		}
		f := c.Flags().Lookup("output")
		if f == nil || f.Shorthand != "o" {
			t.Errorf("%s: no -o/--output flag", path)
			continue
		}
		for _, format := range []string{"table", "json", "yaml", "raw"} {
			if !strings.Contains(f.Usage, format) {
				t.Errorf("%s: --output help %q does not offer %s", path, f.Usage, format)
			}
		}
		if def := c.Annotations[outputDefault]; def == "" || f.DefValue != def {
			t.Errorf("%s: --output default %q, annotation %q; want the same, set by app.result or app.streams", path, f.DefValue, def)
		}
	}
}

func TestAddOutputFlagsRefusesCommandsThatPrintOnTheirOwn(t *testing.T) {
	root := &cobra.Command{Use: "osb"}
	root.AddCommand(&cobra.Command{Use: "rogue", RunE: func(*cobra.Command, []string) error { return nil }})
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "osb rogue") {
			t.Errorf("addOutputFlags on a command built without app.result: recover() = %v, want a panic naming it", r)
		}
	}()
	addOutputFlags(root)
}

func TestOutputFlagPositions(t *testing.T) {
	home := t.TempDir()
	for _, args := range [][]string{
		{"config", "show", "-o", "json"},
		{"-o", "json", "config", "show"}, // upstream's README puts it before the command
		{"config", "--output=json", "show"},
	} {
		code, out, errs := runOSB(t, home, nil, args...)
		var doc struct{ Path string }
		if code != 0 || json.Unmarshal([]byte(out), &doc) != nil || doc.Path == "" {
			t.Errorf("osb %s: exit %d, stdout %q, stderr %q; want a JSON document", strings.Join(args, " "), code, out, errs)
		}
	}
	if code, _, errs := runOSB(t, home, nil, "file", "rm", "sb-1", "/x", "-o", "xml"); code != 2 || !strings.Contains(errs, "table, json, yaml, raw") {
		t.Errorf("file rm -o xml: exit %d, stderr %q; want 2 naming the formats", code, errs)
	}
}

// fakeSandboxServer is a lifecycle server with one running sandbox,
// "sb-1", whose execd keeps files in memory and records what it was
// asked to do.
type fakeSandboxServer struct {
	env map[string]string

	mu    sync.Mutex
	files map[string][]byte
	calls []string // "METHOD path?query" of every execd and lifecycle action
}

func newFakeSandboxServer(t *testing.T) *fakeSandboxServer {
	t.Helper()
	f := &fakeSandboxServer{files: map[string][]byte{}}
	var srv *httptest.Server
	mux := http.NewServeMux()
	record := func(next http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			f.mu.Lock()
			f.calls = append(f.calls, r.Method+" "+r.URL.RequestURI())
			f.mu.Unlock()
			next(w, r)
		}
	}
	ok := func(w http.ResponseWriter, r *http.Request) {}
	accepted := func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusAccepted) }
	mux.HandleFunc("GET /v1/sandboxes/sb-1", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(sandbox.SandboxInfo{ID: "sb-1", Status: sandbox.SandboxStatus{State: sandbox.StateRunning}})
	})
	mux.HandleFunc("GET /v1/sandboxes/sb-1/endpoints/44772", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(sandbox.Endpoint{Endpoint: strings.TrimPrefix(srv.URL, "http://") + "/execd"})
	})
	mux.HandleFunc("GET /execd/ping", ok)
	mux.HandleFunc("DELETE /v1/sandboxes/sb-1", record(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	mux.HandleFunc("POST /v1/sandboxes/sb-1/pause", record(accepted))
	mux.HandleFunc("POST /v1/sandboxes/sb-1/resume", record(accepted))
	mux.HandleFunc("GET /v1/sandboxes/sb-1/diagnostics/logs", record(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "line 1\nline 2")
	}))
	mux.HandleFunc("GET /execd/metrics/watch", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"cpu_count":2,"cpu_used_pct":1.5,"mem_total_mib":512,"mem_used_mib":64,"timestamp":1}`+"\n")
		io.WriteString(w, `{"cpu_count":2,"cpu_used_pct":2.5,"mem_total_mib":512,"mem_used_mib":65,"timestamp":2}`+"\n")
	})
	mux.HandleFunc("DELETE /execd/command", record(ok))
	mux.HandleFunc("DELETE /execd/session/{id}", record(ok))
	mux.HandleFunc("POST /execd/session/{id}/run", record(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range []string{
			`{"type":"init","text":"` + r.PathValue("id") + `","timestamp":1}`,
			`{"type":"stdout","text":"out","timestamp":2}`,
			`{"type":"stderr","text":"err","timestamp":3}`,
			`{"type":"error","error":{"ename":"CommandExecError","evalue":"3","traceback":["exit status 3"]},"timestamp":4}`,
		} {
			io.WriteString(w, ev+"\n\n")
		}
	}))
	mux.HandleFunc("POST /execd/command", record(func(w http.ResponseWriter, r *http.Request) {
		var req sandbox.RunCommandRequest
		json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range []string{
			`{"type":"init","text":"cmd-1","timestamp":1}`,
			`{"type":"stdout","text":` + strconvQuote(req.Command) + `,"timestamp":2}`,
			`{"type":"execution_complete","execution_time":5,"timestamp":3}`,
		} {
			io.WriteString(w, ev+"\n\n")
		}
	}))
	for _, route := range []string{"DELETE /execd/files", "POST /execd/files/mv", "POST /execd/directories", "DELETE /execd/directories", "POST /execd/files/permissions"} {
		mux.HandleFunc(route, record(ok))
	}
	mux.HandleFunc("POST /execd/files/upload", record(func(w http.ResponseWriter, r *http.Request) {
		mr, err := r.MultipartReader()
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var path string
		for {
			p, err := mr.NextPart()
			if err != nil {
				break
			}
			b, _ := io.ReadAll(p)
			switch p.FormName() {
			case "metadata":
				var md struct{ Path string }
				json.Unmarshal(b, &md)
				path = md.Path
			case "file":
				f.mu.Lock()
				f.files[path] = b
				f.mu.Unlock()
			}
		}
	}))
	mux.HandleFunc("GET /execd/files/download", record(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		b, ok := f.files[r.URL.Query().Get("path")]
		f.mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"code":"FILE_NOT_FOUND","message":"no such file"}`)
			return
		}
		w.Write(b)
	}))
	srv = httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	f.env = map[string]string{"OPEN_SANDBOX_DOMAIN": strings.TrimPrefix(srv.URL, "http://"), "OPEN_SANDBOX_API_KEY": "k"}
	return f
}

func (f *fakeSandboxServer) lastCall() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) == 0 {
		return ""
	}
	return f.calls[len(f.calls)-1]
}

// TestActionOutputs runs the commands that change something with -o json
// and -o yaml and checks each prints what it did as an object, and with
// the default table format the short line it always printed.
func TestActionOutputs(t *testing.T) {
	f := newFakeSandboxServer(t)
	tests := []struct {
		args  []string
		stdin string
		want  any    // the -o json document
		table string // the default output
		call  string // the request it made last
	}{
		{[]string{"sandbox", "kill", "sb-1"}, "",
			[]any{map[string]any{"id": "sb-1", "status": "killed"}}, "sb-1\n", "DELETE /v1/sandboxes/sb-1"},
		{[]string{"sandbox", "pause", "sb-1"}, "",
			map[string]any{"id": "sb-1", "status": "paused"}, "sb-1\n", "POST /v1/sandboxes/sb-1/pause"},
		{[]string{"sandbox", "resume", "sb-1"}, "",
			map[string]any{"id": "sb-1", "status": "resumed"}, "sb-1\n", "POST /v1/sandboxes/sb-1/resume"},
		{[]string{"sandbox", "health", "sb-1"}, "",
			map[string]any{"id": "sb-1", "healthy": true}, "healthy\n", ""},
		{[]string{"command", "interrupt", "sb-1", "cmd-7"}, "",
			map[string]any{"sandboxId": "sb-1", "id": "cmd-7", "status": "interrupted"}, "cmd-7\n", "DELETE /execd/command?id=cmd-7"},
		{[]string{"command", "session", "delete", "sb-1", "ses-1"}, "",
			map[string]any{"sandboxId": "sb-1", "session_id": "ses-1", "status": "deleted"}, "ses-1\n", "DELETE /execd/session/ses-1"},
		{[]string{"file", "write", "sb-1", "/tmp/a.txt", "-c", "hello"}, "",
			map[string]any{"sandboxId": "sb-1", "path": "/tmp/a.txt", "size": 5.0, "status": "written"}, "wrote 5 bytes to /tmp/a.txt\n", "POST /execd/files/upload"},
		{[]string{"file", "write", "sb-1", "/tmp/b.txt", "--mode", "600"}, "from stdin",
			map[string]any{"sandboxId": "sb-1", "path": "/tmp/b.txt", "size": 10.0, "mode": 600.0, "status": "written"}, "wrote 10 bytes to /tmp/b.txt\n", "POST /execd/files/upload"},
		{[]string{"file", "rm", "sb-1", "/tmp/a.txt", "/tmp/b.txt"}, "",
			map[string]any{"sandboxId": "sb-1", "paths": []any{"/tmp/a.txt", "/tmp/b.txt"}, "status": "deleted"}, "deleted /tmp/a.txt /tmp/b.txt\n", "DELETE /execd/files?path=%2Ftmp%2Fa.txt&path=%2Ftmp%2Fb.txt"},
		{[]string{"file", "mv", "sb-1", "/tmp/a", "/tmp/b"}, "",
			map[string]any{"sandboxId": "sb-1", "source": "/tmp/a", "destination": "/tmp/b", "status": "moved"}, "moved /tmp/a to /tmp/b\n", "POST /execd/files/mv"},
		{[]string{"file", "mkdir", "sb-1", "/w/x", "--mode", "700"}, "",
			map[string]any{"sandboxId": "sb-1", "paths": []any{"/w/x"}, "mode": 700.0, "status": "created"}, "created /w/x\n", "POST /execd/directories"},
		{[]string{"file", "rmdir", "sb-1", "/w"}, "",
			map[string]any{"sandboxId": "sb-1", "paths": []any{"/w"}, "status": "deleted"}, "deleted /w\n", "DELETE /execd/directories?path=%2Fw"},
		{[]string{"file", "chmod", "sb-1", "/w/run.sh", "--mode", "755", "--owner", "app"}, "",
			map[string]any{"sandboxId": "sb-1", "path": "/w/run.sh", "mode": 755.0, "owner": "app", "status": "changed"}, "changed /w/run.sh\n", "POST /execd/files/permissions"},
		{[]string{"devops", "logs", "sb-1", "-n", "2"}, "",
			map[string]any{"sandboxId": "sb-1", "kind": "logs", "content": "line 1\nline 2"}, "line 1\nline 2\n", "GET /v1/sandboxes/sb-1/diagnostics/logs?tail=2"},
	}
	for _, tt := range tests {
		name := strings.Join(tt.args, " ")
		code, out, errs := runOSBIn(t, tt.stdin, f.env, append(tt.args, "-o", "json")...)
		if code != 0 {
			t.Errorf("osb %s -o json: exit %d, stderr %q", name, code, errs)
			continue
		}
		var got any
		if err := json.Unmarshal([]byte(out), &got); err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("osb %s -o json = %s (%v), want %v", name, out, err, tt.want)
		}
		if tt.call != "" && !strings.HasPrefix(f.lastCall(), tt.call) {
			t.Errorf("osb %s: last request %q, want %q", name, f.lastCall(), tt.call)
		}
		code, out, errs = runOSBIn(t, tt.stdin, f.env, append(tt.args, "-o", "yaml")...)
		if code != 0 || !strings.Contains(out, "sb-1") || strings.HasPrefix(out, "{") || strings.HasPrefix(out, "[") {
			t.Errorf("osb %s -o yaml: exit %d, %q, stderr %q; want a YAML document", name, code, out, errs)
		}
		code, out, errs = runOSBIn(t, tt.stdin, f.env, tt.args...)
		if code != 0 || out != tt.table {
			t.Errorf("osb %s: exit %d, %q, stderr %q; want %q", name, code, out, errs, tt.table)
		}
	}
}

// TestFileCatOutput: the default and raw print the bytes unchanged, json
// carries them as text or base64.
func TestFileCatOutput(t *testing.T) {
	f := newFakeSandboxServer(t)
	binary := "\x00\xff\xfe bytes\r\nno newline at end"
	f.files["/bin.dat"] = []byte(binary)
	f.files["/text.txt"] = []byte("héllo\n")
	for _, args := range [][]string{{"file", "cat", "sb-1", "/bin.dat"}, {"file", "cat", "sb-1", "/bin.dat", "-o", "raw"}, {"file", "cat", "sb-1", "/bin.dat", "-o", "table"}} {
		if code, out, errs := runOSBIn(t, "", f.env, args...); code != 0 || out != binary {
			t.Errorf("osb %s: exit %d, %q, stderr %q; want the bytes unchanged", strings.Join(args, " "), code, out, errs)
		}
	}
	for _, tt := range []struct {
		path string
		want fileContent
	}{
		{"/text.txt", fileContent{SandboxID: "sb-1", Path: "/text.txt", Size: 7, Encoding: "utf-8", Content: "héllo\n"}},
		{"/bin.dat", fileContent{SandboxID: "sb-1", Path: "/bin.dat", Size: len(binary), Encoding: "base64", Content: "AP/+IGJ5dGVzDQpubyBuZXdsaW5lIGF0IGVuZA=="}},
	} {
		code, out, errs := runOSBIn(t, "", f.env, "file", "cat", "sb-1", tt.path, "-o", "json")
		var got fileContent
		if code != 0 || json.Unmarshal([]byte(out), &got) != nil || got != tt.want {
			t.Errorf("file cat %s -o json: exit %d, %s, stderr %q; want %+v", tt.path, code, out, errs, tt.want)
		}
	}
	if code, _, errs := runOSBIn(t, "", f.env, "file", "download", "sb-1", "/text.txt", "-", "-o", "json"); code != 2 || !strings.Contains(errs, "local path") {
		t.Errorf("file download to - with -o json: exit %d, stderr %q; want a usage error", code, errs)
	}
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// TestExecShortcut: upstream's `osb exec ID -- cmd` is command run.
func TestExecShortcut(t *testing.T) {
	f := newFakeSandboxServer(t)
	if code, out, errs := runOSBIn(t, "", f.env, "exec", "sb-1", "--", "echo", "hello world"); code != 0 || out != "echo 'hello world'\n" {
		t.Errorf("exec: exit %d, stdout %q, stderr %q; want the fake's echo of the command", code, out, errs)
	}
	code, out, errs := runOSBIn(t, "", f.env, "exec", "sb-1", "-o", "json", "--", "true")
	var got runResult
	want := runResult{SandboxID: "sb-1", ID: "cmd-1", Stdout: "true\n", ExecutionTime: 5}
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("exec -o json: exit %d, %s, stderr %q; want %+v", code, out, errs, want)
	}
}

// TestMetricsWatchOutput: a watch is one JSON object a line, or a stream
// of YAML documents. The fake ends its stream after two updates, which
// osb reports (exit 1) after printing them.
func TestMetricsWatchOutput(t *testing.T) {
	f := newFakeSandboxServer(t)
	code, out, errs := runOSBIn(t, "", f.env, "sandbox", "metrics", "sb-1", "--watch", "-o", "json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var m sandbox.Metrics
	if code != 1 || len(lines) != 2 || json.Unmarshal([]byte(lines[1]), &m) != nil || m.CPUUsedPct != 2.5 {
		t.Errorf("metrics --watch -o json: exit %d, %q, stderr %q; want two JSON lines", code, out, errs)
	}
	code, out, errs = runOSBIn(t, "", f.env, "sandbox", "metrics", "sb-1", "--watch", "-o", "yaml")
	dec := yaml.NewDecoder(strings.NewReader(out))
	var docs []map[string]any
	for {
		var d map[string]any
		if err := dec.Decode(&d); err != nil {
			break
		}
		docs = append(docs, d)
	}
	if code != 1 || len(docs) != 2 || docs[1]["mem_used_mib"] != 65 || !strings.Contains(errs, "stream ended") {
		t.Errorf("metrics --watch -o yaml: exit %d, %q, stderr %q; want two YAML documents", code, out, errs)
	}
}

// TestSessionRunOutput: -o json collects the run into one object and
// still exits with the remote exit code.
func TestSessionRunOutput(t *testing.T) {
	f := newFakeSandboxServer(t)
	code, out, errs := runOSBIn(t, "", f.env, "command", "session", "run", "sb-1", "ses-1", "-o", "json", "--", "false")
	var got runResult
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("session run -o json = %q: %v", out, err)
	}
	want := runResult{SandboxID: "sb-1", SessionID: "ses-1", ExitCode: 3, Stdout: "out\n", Stderr: "err\n",
		Error: &sandbox.StreamError{Name: "CommandExecError", Value: "3", Traceback: []string{"exit status 3"}}}
	if code != 3 || !reflect.DeepEqual(got, want) || errs != "" {
		t.Errorf("session run -o json: exit %d, %+v, stderr %q; want exit 3, %+v, no stderr", code, got, errs, want)
	}
	code, out, errs = runOSBIn(t, "", f.env, "command", "session", "run", "sb-1", "ses-1", "--", "false")
	if code != 3 || out != "out\n" || errs != "err\n" {
		t.Errorf("session run: exit %d, stdout %q, stderr %q; want 3 with the output streamed", code, out, errs)
	}
}
