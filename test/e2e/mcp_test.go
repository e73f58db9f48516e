package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// mcpToolNames is the tool set of the MCP server (upstream's, same names,
// plus code and egress tools).
var mcpToolNames = []string{
	"sandbox_create", "sandbox_connect", "sandbox_kill", "sandbox_get_info", "sandbox_list",
	"sandbox_renew", "sandbox_get_metrics", "sandbox_healthcheck", "sandbox_get_endpoint",
	"command_run", "command_interrupt",
	"code_run", "code_context_create", "code_context_list", "code_context_delete",
	"file_read", "file_write", "file_delete", "file_search", "file_create_directories",
	"file_delete_directories", "file_move", "file_replace_contents",
	"egress_get_policy", "egress_patch_policy",
}

// mcpCmd is the opensandbox-mcp binary set up to talk to srv; its stderr
// (the logs) goes to a file shown when the test fails.
func mcpCmd(t *testing.T, srv *serverProc, args ...string) *osexec.Cmd {
	t.Helper()
	cmd := osexec.Command(binPath(t, "opensandbox-mcp"), args...)
	cmd.Env = append(os.Environ(),
		"OPEN_SANDBOX_DOMAIN="+strings.TrimPrefix(srv.base, "http://"),
		"OPEN_SANDBOX_API_KEY="+testAPIKey,
		"OPEN_SANDBOX_PROTOCOL=http",
	)
	logPath := filepath.Join(t.TempDir(), "mcp.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logf
	t.Cleanup(func() {
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("opensandbox-mcp log:\n%s", b)
		}
	})
	return cmd
}

// mcpStdio starts opensandbox-mcp on stdio and connects the go-sdk client.
func mcpStdio(t *testing.T, srv *serverProc) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "v0"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: mcpCmd(t, srv)}, nil)
	if err != nil {
		t.Fatalf("connect to opensandbox-mcp over stdio: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// mcpHTTP starts opensandbox-mcp on streamable HTTP and connects the go-sdk
// client once the port answers.
func mcpHTTP(t *testing.T, srv *serverProc) *mcp.ClientSession {
	t.Helper()
	addr := freeAddr(t)
	cmd := mcpCmd(t, srv, "--transport", "streamable-http", "--addr", addr)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start opensandbox-mcp: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			t.Errorf("opensandbox-mcp did not exit within 15s of SIGINT")
			cmd.Process.Kill()
			<-exited
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-exited:
			t.Fatalf("opensandbox-mcp exited during start")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("opensandbox-mcp never listened on %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "v0"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp"}, nil)
	if err != nil {
		t.Fatalf("connect to opensandbox-mcp over streamable HTTP: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// mcpCall calls a tool that must succeed and decodes its structured result.
func mcpCall(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, out any) {
	t.Helper()
	res := mcpCallRaw(t, cs, tool, args)
	if res.IsError {
		t.Fatalf("%s(%v): tool error: %s", tool, args, mcpText(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: decode structured content %s: %v", tool, b, err)
		}
	}
}

func mcpCallRaw(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s(%v): protocol error: %v", tool, args, err)
	}
	return res
}

func mcpText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// mcpCheckTools lists the tools: every one of the set, each with an input
// and an output schema of type object.
func mcpCheckTools(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		for what, schema := range map[string]any{"input": tool.InputSchema, "output": tool.OutputSchema} {
			var s struct {
				Type       string         `json:"type"`
				Properties map[string]any `json:"properties"`
			}
			b, _ := json.Marshal(schema)
			if err := json.Unmarshal(b, &s); err != nil || s.Type != "object" || len(s.Properties) == 0 {
				t.Errorf("tool %s: %s schema %s, want an object schema with properties", tool.Name, what, b)
			}
		}
	}
	want := slices.Clone(mcpToolNames)
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("tools = %v,\nwant %v", names, want)
	}
}

// mcpCreate creates a sandbox through the tool and makes sure it is gone at
// the end of the test.
func mcpCreate(t *testing.T, srv *serverProc, cs *mcp.ClientSession, metadata map[string]string) string {
	t.Helper()
	var out struct {
		SandboxID string `json:"sandbox_id"`
		Info      struct {
			ID         string            `json:"id"`
			State      string            `json:"state"`
			Entrypoint []string          `json:"entrypoint"`
			Metadata   map[string]string `json:"metadata"`
			Connected  bool              `json:"connected"`
		} `json:"info"`
	}
	mcpCall(t, cs, "sandbox_create", map[string]any{
		"image":           minimalImage(t),
		"entrypoint":      []string{"sleep", "100000"},
		"timeout_seconds": 600,
		"metadata":        metadata,
	}, &out)
	id := out.SandboxID
	t.Cleanup(func() {
		r, _ := http.NewRequest("DELETE", srv.base+"/v1/sandboxes/"+id, nil)
		r.Header.Set(sandbox.APIKeyHeader, testAPIKey)
		if resp, err := http.DefaultClient.Do(r); err == nil {
			resp.Body.Close()
		}
	})
	if id == "" || out.Info.ID != id || out.Info.State != sandbox.StateRunning || !out.Info.Connected ||
		!slices.Equal(out.Info.Entrypoint, []string{"sleep", "100000"}) {
		t.Fatalf("sandbox_create = %+v, want a connected Running sandbox with entrypoint sleep 100000", out)
	}
	return id
}

type mcpRunOut struct {
	ExecutionID     string `json:"execution_id"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	ExitCode        *int   `json:"exit_code"`
	Error           string `json:"error"`
	StdoutTruncated bool   `json:"stdout_truncated"`
}

func mcpRun(t *testing.T, cs *mcp.ClientSession, id, command string) mcpRunOut {
	t.Helper()
	var out mcpRunOut
	mcpCall(t, cs, "command_run", map[string]any{"sandbox_id": id, "command": command}, &out)
	if out.ExecutionID == "" || out.ExitCode == nil {
		t.Fatalf("command_run(%q) = %+v, want an execution_id and an exit_code", command, out)
	}
	return out
}

func TestMCPStdio(t *testing.T) {
	srv := startServer(t, serverOpts{})
	cs := mcpStdio(t, srv)
	mcpCheckTools(t, cs)

	run := fmt.Sprintf("mcp-%d", time.Now().UnixNano())
	id := mcpCreate(t, srv, cs, map[string]string{"run": run})

	t.Run("command_run", func(t *testing.T) {
		out := mcpRun(t, cs, id, "echo hello; echo oops >&2")
		if out.Stdout != "hello\n" || out.Stderr != "oops\n" || *out.ExitCode != 0 {
			t.Errorf("command_run(echo) = %+v, want stdout \"hello\\n\", stderr \"oops\\n\", exit 0", out)
		}
		out = mcpRun(t, cs, id, "exit 3")
		if *out.ExitCode != 3 {
			t.Errorf("command_run(exit 3) exit_code = %d, want 3 (%+v)", *out.ExitCode, out)
		}
		var wd mcpRunOut
		mcpCall(t, cs, "command_run", map[string]any{"sandbox_id": id, "command": "echo $PWD", "working_directory": "/bin"}, &wd)
		if wd.Stdout != "/bin\n" {
			t.Errorf("command_run(echo $PWD, working_directory /bin) = %+v, want stdout \"/bin\\n\"", wd)
		}
	})

	t.Run("command_run output is capped", func(t *testing.T) {
		// About 300 KB of output on stdout through the shell's builtins.
		out := mcpRun(t, cs, id, `i=0; while [ $i -lt 30000 ]; do echo "line $i of a chatty command"; i=$((i+1)); done`)
		if !out.StdoutTruncated || len(out.Stdout) > 70_000 || !strings.Contains(out.Stdout, "output truncated") {
			t.Errorf("chatty command: stdout %d bytes, truncated %v; want at most about 64 KiB with a truncation note", len(out.Stdout), out.StdoutTruncated)
		}
		if !strings.HasPrefix(out.Stdout, "line 0 of") || !strings.HasSuffix(out.Stdout, "line 29999 of a chatty command\n") {
			t.Errorf("chatty command: stdout does not keep both the first and the last line: %.80q ... %.80q", out.Stdout, out.Stdout[max(0, len(out.Stdout)-80):])
		}
	})

	t.Run("background", func(t *testing.T) {
		var out mcpRunOut
		mcpCall(t, cs, "command_run", map[string]any{"sandbox_id": id, "command": "sleep 600", "background": true}, &out)
		if out.ExecutionID == "" || out.ExitCode != nil {
			t.Fatalf("command_run(background) = %+v, want an execution_id and no exit_code", out)
		}
		var in struct {
			Interrupted bool `json:"interrupted"`
		}
		mcpCall(t, cs, "command_interrupt", map[string]any{"sandbox_id": id, "execution_id": out.ExecutionID}, &in)
		if !in.Interrupted {
			t.Errorf("command_interrupt = %+v, want interrupted", in)
		}
	})

	t.Run("files", func(t *testing.T) {
		content := "first line\nsecond line é\n"
		var w struct {
			BytesWritten int `json:"bytes_written"`
		}
		mcpCall(t, cs, "file_write", map[string]any{"sandbox_id": id, "path": "/work/src/notes.txt", "content": content, "mode": 644}, &w)
		if w.BytesWritten != len(content) {
			t.Errorf("file_write bytes_written = %d, want %d", w.BytesWritten, len(content))
		}
		var r struct {
			Path    string `json:"path"`
			Content string `json:"content"`
		}
		mcpCall(t, cs, "file_read", map[string]any{"sandbox_id": id, "path": "/work/src/notes.txt"}, &r)
		if r.Content != content || r.Path != "/work/src/notes.txt" {
			t.Errorf("file_read = %+v, want content %q", r, content)
		}
		mcpCall(t, cs, "file_read", map[string]any{"sandbox_id": id, "path": "/work/src/notes.txt", "range_header": "bytes=6-9"}, &r)
		if r.Content != "line" {
			t.Errorf("file_read(bytes=6-9) = %q, want \"line\"", r.Content)
		}
		mcpCall(t, cs, "file_write", map[string]any{"sandbox_id": id, "path": "/work/src/bin.dat", "content": "AAEC/w==", "encoding": "base64"}, nil)
		mcpCall(t, cs, "file_read", map[string]any{"sandbox_id": id, "path": "/work/src/bin.dat", "encoding": "base64"}, &r)
		if r.Content != "AAEC/w==" {
			t.Errorf("file_read(base64) = %q, want \"AAEC/w==\"", r.Content)
		}

		var s struct {
			Files []struct {
				Path string `json:"path"`
				Type string `json:"type"`
				Size int64  `json:"size"`
			} `json:"files"`
		}
		mcpCall(t, cs, "file_search", map[string]any{"sandbox_id": id, "path": "/work", "pattern": "*.txt"}, &s)
		if len(s.Files) != 1 || s.Files[0].Path != "/work/src/notes.txt" || s.Files[0].Size != int64(len(content)) {
			t.Errorf("file_search(*.txt) = %+v, want only /work/src/notes.txt", s.Files)
		}

		var rep struct {
			Results []struct {
				Path          string `json:"path"`
				ReplacedCount int    `json:"replaced_count"`
			} `json:"results"`
		}
		mcpCall(t, cs, "file_replace_contents", map[string]any{"sandbox_id": id, "entries": []any{
			map[string]any{"path": "/work/src/notes.txt", "old_content": "line", "new_content": "row"},
		}}, &rep)
		if len(rep.Results) != 1 || rep.Results[0].ReplacedCount != 2 {
			t.Errorf("file_replace_contents = %+v, want 2 replacements", rep.Results)
		}
		mcpCall(t, cs, "file_create_directories", map[string]any{"sandbox_id": id, "entries": []any{map[string]any{"path": "/work/a/b"}}}, nil)
		mcpCall(t, cs, "file_move", map[string]any{"sandbox_id": id, "entries": []any{
			map[string]any{"src": "/work/src/notes.txt", "dest": "/work/a/b/moved.txt"},
		}}, nil)
		mcpCall(t, cs, "file_read", map[string]any{"sandbox_id": id, "path": "/work/a/b/moved.txt"}, &r)
		if r.Content != "first row\nsecond row é\n" {
			t.Errorf("file_read(moved.txt) = %q after replace and move", r.Content)
		}
		mcpCall(t, cs, "file_delete", map[string]any{"sandbox_id": id, "paths": []string{"/work/src/bin.dat"}}, nil)
		mcpCall(t, cs, "file_delete_directories", map[string]any{"sandbox_id": id, "paths": []string{"/work/a"}}, nil)
		mcpCall(t, cs, "file_search", map[string]any{"sandbox_id": id, "path": "/work", "pattern": "*"}, &s)
		if len(s.Files) != 0 {
			t.Errorf("file_search after deletes = %+v, want nothing", s.Files)
		}
		if res := mcpCallRaw(t, cs, "file_read", map[string]any{"sandbox_id": id, "path": "/work/nope"}); !res.IsError {
			t.Errorf("file_read(missing file) = %s, want a tool error", mcpText(res))
		}
	})

	t.Run("lifecycle", func(t *testing.T) {
		var info struct {
			SandboxID string `json:"sandbox_id"`
			Info      struct {
				State     string            `json:"state"`
				Image     string            `json:"image"`
				Metadata  map[string]string `json:"metadata"`
				ExpiresAt time.Time         `json:"expires_at"`
			} `json:"info"`
		}
		mcpCall(t, cs, "sandbox_get_info", map[string]any{"sandbox_id": id}, &info)
		if info.SandboxID != id || info.Info.State != sandbox.StateRunning || info.Info.Metadata["run"] != run || info.Info.Image == "" {
			t.Errorf("sandbox_get_info = %+v", info)
		}

		var list struct {
			Sandboxes []struct {
				ID        string `json:"id"`
				Connected bool   `json:"connected"`
			} `json:"sandboxes"`
			TotalItems int `json:"total_items"`
		}
		mcpCall(t, cs, "sandbox_list", map[string]any{"filter": map[string]any{"metadata": map[string]string{"run": run}, "states": []string{"Running"}}}, &list)
		if len(list.Sandboxes) != 1 || list.Sandboxes[0].ID != id || !list.Sandboxes[0].Connected || list.TotalItems != 1 {
			t.Errorf("sandbox_list(run=%s) = %+v, want just %s, connected", run, list, id)
		}

		var renew struct {
			ExpiresAt time.Time `json:"expires_at"`
		}
		mcpCall(t, cs, "sandbox_renew", map[string]any{"sandbox_id": id, "timeout_seconds": 1800}, &renew)
		if d := time.Until(renew.ExpiresAt); d < 25*time.Minute || d > 31*time.Minute {
			t.Errorf("sandbox_renew(1800s) expires_at = %v (in %v), want about 30m from now", renew.ExpiresAt, d)
		}

		var health struct {
			Healthy bool `json:"healthy"`
		}
		mcpCall(t, cs, "sandbox_healthcheck", map[string]any{"sandbox_id": id}, &health)
		if !health.Healthy {
			t.Errorf("sandbox_healthcheck = %+v, want healthy", health)
		}
		var metrics struct {
			CPUCount         float64 `json:"cpu_count"`
			MemoryTotalInMiB float64 `json:"memory_total_in_mib"`
		}
		mcpCall(t, cs, "sandbox_get_metrics", map[string]any{"sandbox_id": id}, &metrics)
		if metrics.CPUCount <= 0 || metrics.MemoryTotalInMiB <= 0 {
			t.Errorf("sandbox_get_metrics = %+v, want positive cpu_count and memory_total_in_mib", metrics)
		}
		var ep struct {
			Endpoint string            `json:"endpoint"`
			Headers  map[string]string `json:"headers"`
		}
		mcpCall(t, cs, "sandbox_get_endpoint", map[string]any{"sandbox_id": id, "port": sandbox.ExecdPort}, &ep)
		if ep.Endpoint == "" || strings.Contains(ep.Endpoint, "://") {
			t.Errorf("sandbox_get_endpoint(%d) = %+v, want host:port without scheme", sandbox.ExecdPort, ep)
		}
	})

	t.Run("unknown sandbox", func(t *testing.T) {
		res := mcpCallRaw(t, cs, "command_run", map[string]any{"sandbox_id": "does-not-exist", "command": "echo hi"})
		if !res.IsError || !strings.Contains(mcpText(res), "sandbox_connect") {
			t.Errorf("command_run(unknown id) = IsError %v %q, want a tool error pointing at sandbox_connect", res.IsError, mcpText(res))
		}
		res = mcpCallRaw(t, cs, "command_run", map[string]any{"sandbox_id": "does-not-exist", "command": "echo hi", "connect_if_missing": true})
		if !res.IsError || !strings.Contains(mcpText(res), "does-not-exist") {
			t.Errorf("command_run(unknown id, connect_if_missing) = IsError %v %q, want a tool error naming the id", res.IsError, mcpText(res))
		}
		res = mcpCallRaw(t, cs, "sandbox_get_info", map[string]any{"sandbox_id": "does-not-exist"})
		if !res.IsError {
			t.Errorf("sandbox_get_info(unknown id) = %q, want a tool error", mcpText(res))
		}
	})

	t.Run("connect from a second server", func(t *testing.T) {
		// A fresh process knows no sandbox: it must connect first.
		cs2 := mcpStdio(t, srv)
		res := mcpCallRaw(t, cs2, "file_search", map[string]any{"sandbox_id": id, "path": "/", "pattern": "*.txt"})
		if !res.IsError || !strings.Contains(mcpText(res), "sandbox_connect") {
			t.Errorf("file_search before connect = IsError %v %q, want a tool error pointing at sandbox_connect", res.IsError, mcpText(res))
		}
		var c struct {
			SandboxID string `json:"sandbox_id"`
		}
		mcpCall(t, cs2, "sandbox_connect", map[string]any{"sandbox_id": id}, &c)
		if out := mcpRun(t, cs2, id, "echo connected"); out.Stdout != "connected\n" {
			t.Errorf("command_run after sandbox_connect stdout = %q", out.Stdout)
		}
		// connect_if_missing in a third process connects on the fly.
		cs3 := mcpStdio(t, srv)
		var out mcpRunOut
		mcpCall(t, cs3, "command_run", map[string]any{"sandbox_id": id, "command": "echo lazy", "connect_if_missing": true}, &out)
		if out.Stdout != "lazy\n" {
			t.Errorf("command_run(connect_if_missing) stdout = %q", out.Stdout)
		}
	})

	t.Run("kill", func(t *testing.T) {
		var k struct {
			Killed bool `json:"killed"`
		}
		mcpCall(t, cs, "sandbox_kill", map[string]any{"sandbox_id": id}, &k)
		if !k.Killed {
			t.Errorf("sandbox_kill = %+v", k)
		}
		var er sandbox.ErrorResponse
		srv.api(t, "GET", "/v1/sandboxes/"+id, nil, http.StatusNotFound, &er)
		res := mcpCallRaw(t, cs, "command_run", map[string]any{"sandbox_id": id, "command": "echo hi"})
		if !res.IsError || !strings.Contains(mcpText(res), "sandbox_connect") {
			t.Errorf("command_run after kill = IsError %v %q, want a tool error (no longer connected)", res.IsError, mcpText(res))
		}
	})
}

func TestMCPStreamableHTTP(t *testing.T) {
	srv := startServer(t, serverOpts{})
	cs := mcpHTTP(t, srv)
	mcpCheckTools(t, cs)
	id := mcpCreate(t, srv, cs, nil)

	// Calls from concurrent requests share the process's registry.
	var wg sync.WaitGroup
	outs := make([]string, 4)
	for i := range outs {
		wg.Go(func() {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "command_run", Arguments: map[string]any{"sandbox_id": id, "command": fmt.Sprintf("echo %d", i)}})
			if err != nil {
				outs[i] = "protocol error: " + err.Error()
				return
			}
			var out mcpRunOut
			b, _ := json.Marshal(res.StructuredContent)
			json.Unmarshal(b, &out)
			outs[i] = out.Stdout
		})
	}
	wg.Wait()
	for i, got := range outs {
		if want := fmt.Sprintf("%d\n", i); got != want {
			t.Errorf("concurrent command_run %d stdout = %q, want %q", i, got, want)
		}
	}
	if out := mcpRun(t, cs, id, "exit 3"); *out.ExitCode != 3 {
		t.Errorf("command_run(exit 3) = %+v, want exit_code 3", out)
	}
	mcpCall(t, cs, "sandbox_kill", map[string]any{"sandbox_id": id}, nil)
	var er sandbox.ErrorResponse
	srv.api(t, "GET", "/v1/sandboxes/"+id, nil, http.StatusNotFound, &er)
}

// TestMCPFlags checks the command line: a bad transport fails at once with
// a message on stderr and nothing on stdout (which is the protocol).
func TestMCPFlags(t *testing.T) {
	cmd := osexec.Command(binPath(t, "opensandbox-mcp"), "--transport", "carrier-pigeon")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err == nil {
		t.Fatalf("opensandbox-mcp --transport carrier-pigeon succeeded, want a failure")
	}
	if stdout.Len() != 0 || !strings.Contains(stderr.String(), "carrier-pigeon") {
		t.Errorf("stdout %q, stderr %q; want nothing on stdout and the bad transport named on stderr", stdout.String(), stderr.String())
	}
}
