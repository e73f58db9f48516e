package mcpserver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// fakeLifecycle is an in-process lifecycle server that knows one sandbox.
func fakeLifecycle(t *testing.T) *httptest.Server {
	t.Helper()
	exp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	sb := sandbox.SandboxInfo{
		ID:         "sb-1",
		Image:      &sandbox.ImageSpec{URI: "busybox:latest"},
		Status:     sandbox.SandboxStatus{State: sandbox.StateRunning},
		Entrypoint: []string{"sleep", "infinity"},
		ExpiresAt:  &exp,
		CreatedAt:  exp.Add(-time.Hour),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(sandbox.ListSandboxesResponse{
			Items:      []sandbox.SandboxInfo{sb, {ID: "sb-2", Status: sandbox.SandboxStatus{State: sandbox.StatePaused}}},
			Pagination: sandbox.PaginationInfo{Page: 1, PageSize: 20, TotalItems: 2, TotalPages: 1},
		})
	})
	mux.HandleFunc("GET /v1/sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != sb.ID {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			json.NewEncoder(w).Encode(sandbox.ErrorResponse{Code: "SANDBOX_NOT_FOUND", Message: "no sandbox " + r.PathValue("id")})
			return
		}
		json.NewEncoder(w).Encode(sb)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// connect runs a server built from cfg (Client pointed at domain) on an
// in-memory transport and returns a client session to it.
func connect(t *testing.T, domain string, cfg Config) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	c, err := sandbox.NewClient(sandbox.WithDomain(domain), sandbox.WithAPIKey("k"), sandbox.WithRetry(sandbox.RetryPolicy{}))
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	cfg.Client = c
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatalf("server Connect: %v", err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatalf("client Connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("CallTool(%s, %v): protocol error %v", name, args, err)
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestListTools(t *testing.T) {
	cs := connect(t, "127.0.0.1:1", Config{ToolPrefix: "osb_"})
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		if tool.InputSchema == nil || tool.OutputSchema == nil {
			t.Errorf("tool %s: input schema %v, output schema %v; want both", tool.Name, tool.InputSchema != nil, tool.OutputSchema != nil)
		}
		if tool.Description == "" {
			t.Errorf("tool %s has no description", tool.Name)
		}
	}
	var want []string
	for _, n := range ToolNames {
		want = append(want, "osb_"+n)
	}
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("tools = %v, want %v", names, want)
	}
}

func TestInputSchemaDefaults(t *testing.T) {
	cs := connect(t, "127.0.0.1:1", Config{})
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	want := map[string]map[string]string{
		"sandbox_create":  {"timeout_seconds": "600", "ready_timeout_seconds": "30", "health_check_polling_interval_ms": "200", "skip_health_check": "false"},
		"sandbox_connect": {"connect_timeout_seconds": "30"},
		"command_run":     {"background": "false"},
		"file_read":       {"encoding": `"utf-8"`},
		"file_write":      {"encoding": `"utf-8"`, "mode": "755"},
	}
	for _, tool := range res.Tools {
		b, _ := json.Marshal(tool.InputSchema)
		var s struct {
			Properties map[string]struct {
				Default json.RawMessage `json:"default"`
			} `json:"properties"`
			Required []string `json:"required"`
		}
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("tool %s: schema %s: %v", tool.Name, b, err)
		}
		for prop, def := range want[tool.Name] {
			if got := string(s.Properties[prop].Default); got != def {
				t.Errorf("tool %s: default of %s = %s, want %s", tool.Name, prop, got, def)
			}
		}
		if _, ok := s.Properties["sandbox_id"]; ok && tool.Name != "sandbox_list" && !slices.Contains(s.Required, "sandbox_id") {
			t.Errorf("tool %s: sandbox_id is not required (required = %v)", tool.Name, s.Required)
		}
	}
}

// TestToolErrors checks that bad arguments and unknown sandboxes come back
// as tool errors (IsError with a message naming the problem), never as
// protocol errors. No sandbox is needed: each fails before any request to
// the sandbox.
func TestToolErrors(t *testing.T) {
	cs := connect(t, "127.0.0.1:1", Config{})
	tests := []struct {
		tool string
		args map[string]any
		want string // in the error text
	}{
		{"sandbox_create", map[string]any{}, "image"},
		{"sandbox_create", map[string]any{"image": "x", "auth_username": "u"}, "auth_password"},
		{"sandbox_create", map[string]any{"image": "x", "network_policy": map[string]any{"default_action": "maybe"}}, "default_action"},
		{"sandbox_create", map[string]any{"image": "x", "timeout_seconds": "ten"}, "timeout_seconds"},
		{"sandbox_renew", map[string]any{"sandbox_id": "a", "timeout_seconds": 0}, "timeout_seconds"},
		{"sandbox_get_endpoint", map[string]any{"sandbox_id": "a", "port": 70000}, "port"},
		{"sandbox_get_info", map[string]any{"sandbox_id": "a", "bogus": 1}, "bogus"},
		{"command_run", map[string]any{"sandbox_id": "nope", "command": "echo hi"}, "sandbox_connect"},
		{"command_run", map[string]any{"sandbox_id": "nope", "command": " "}, "command"},
		{"command_run", map[string]any{"sandbox_id": "nope", "command": "x", "timeout_seconds": -1}, "timeout_seconds"},
		{"command_interrupt", map[string]any{"sandbox_id": "nope", "execution_id": "e"}, "sandbox_connect"},
		{"sandbox_get_metrics", map[string]any{"sandbox_id": "nope"}, "sandbox_connect"},
		{"sandbox_healthcheck", map[string]any{"sandbox_id": "nope"}, "connect_if_missing"},
		{"file_read", map[string]any{"sandbox_id": "nope", "path": "/a", "encoding": "latin1"}, "encoding"},
		{"file_read", map[string]any{"sandbox_id": "nope", "path": "/a", "range_header": "bytes=9-1"}, "range_header"},
		{"file_read", map[string]any{"sandbox_id": "nope", "path": "/a"}, "sandbox_connect"},
		{"file_write", map[string]any{"sandbox_id": "nope", "path": "/a", "content": "!", "encoding": "base64"}, "base64"},
		{"file_write", map[string]any{"sandbox_id": "nope", "path": "/a", "content": "x", "mode": 789}, "mode"},
		{"file_delete", map[string]any{"sandbox_id": "nope", "paths": []string{}}, "paths"},
		{"file_delete", map[string]any{"sandbox_id": "nope", "paths": []string{""}}, "paths[0]"},
		{"file_search", map[string]any{"sandbox_id": "nope", "path": "/", "pattern": ""}, "pattern"},
		{"file_create_directories", map[string]any{"sandbox_id": "nope", "entries": []any{map[string]any{"path": "/d", "mode": 8}}}, "entries[0].mode"},
		{"file_delete_directories", map[string]any{"sandbox_id": "nope", "paths": []string{"/d"}}, "sandbox_connect"},
		{"file_move", map[string]any{"sandbox_id": "nope", "entries": []any{map[string]any{"src": "/a", "dest": ""}}}, "entries[0]"},
		{"file_replace_contents", map[string]any{"sandbox_id": "nope", "entries": []any{map[string]any{"path": "/a", "old_content": "", "new_content": "b"}}}, "old_content"},
	}
	for _, tt := range tests {
		res := call(t, cs, tt.tool, tt.args)
		if !res.IsError {
			t.Errorf("%s(%v): IsError = false (%s), want a tool error", tt.tool, tt.args, text(res))
			continue
		}
		if got := text(res); !strings.Contains(got, tt.want) {
			t.Errorf("%s(%v): error %q does not mention %q", tt.tool, tt.args, got, tt.want)
		}
	}
}

func TestLifecycleToolsOutput(t *testing.T) {
	srv := fakeLifecycle(t)
	cs := connect(t, srv.URL, Config{})

	res := call(t, cs, "sandbox_list", map[string]any{"filter": map[string]any{"states": []string{"Running"}}})
	if res.IsError {
		t.Fatalf("sandbox_list: tool error %s", text(res))
	}
	var list ListOut
	remarshal(t, res.StructuredContent, &list)
	if len(list.Sandboxes) != 2 || list.Sandboxes[0].ID != "sb-1" || list.Sandboxes[0].Image != "busybox:latest" || list.Sandboxes[1].State != "Paused" || list.TotalItems != 2 {
		t.Errorf("sandbox_list = %+v, want sb-1 (busybox:latest) and sb-2 (Paused), 2 in total", list)
	}
	if list.Sandboxes[0].Connected {
		t.Errorf("sandbox_list: sb-1 connected = true, want false")
	}

	res = call(t, cs, "sandbox_get_info", map[string]any{"sandbox_id": "sb-1"})
	if res.IsError {
		t.Fatalf("sandbox_get_info: tool error %s", text(res))
	}
	var info SandboxOut
	remarshal(t, res.StructuredContent, &info)
	if info.SandboxID != "sb-1" || info.Info.State != "Running" || info.Info.ExpiresAt == nil || !slices.Equal(info.Info.Entrypoint, []string{"sleep", "infinity"}) {
		t.Errorf("sandbox_get_info = %+v", info)
	}

	res = call(t, cs, "sandbox_get_info", map[string]any{"sandbox_id": "missing"})
	if !res.IsError || !strings.Contains(text(res), "SANDBOX_NOT_FOUND") {
		t.Errorf("sandbox_get_info(missing) = IsError %v %q, want a tool error with SANDBOX_NOT_FOUND", res.IsError, text(res))
	}
}

func remarshal(t *testing.T, from, to any) {
	t.Helper()
	b, err := json.Marshal(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, to); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}

// TestNullOptionalArguments checks that null stands for "not given" in
// optional arguments, as models often send it.
func TestNullOptionalArguments(t *testing.T) {
	srv := fakeLifecycle(t)
	cs := connect(t, srv.URL, Config{})
	res := call(t, cs, "sandbox_list", map[string]any{"filter": nil})
	if res.IsError {
		t.Errorf("sandbox_list(filter: null): tool error %s", text(res))
	}
	res = call(t, cs, "sandbox_create", map[string]any{"image": "x", "metadata": nil, "env": nil, "auth_username": "u"})
	if !res.IsError || !strings.Contains(text(res), "auth_password") {
		t.Errorf("sandbox_create(metadata: null, ...) = %q, want to get past the schema to the auth_password check", text(res))
	}
	res = call(t, cs, "sandbox_get_info", map[string]any{"sandbox_id": nil})
	if !res.IsError {
		t.Errorf("sandbox_get_info(sandbox_id: null) = %q, want a tool error (required)", text(res))
	}
}
