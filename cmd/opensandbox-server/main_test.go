package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	osexec "os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/api"
	"github.com/opensandbox-go/opensandbox/internal/server"
	"github.com/opensandbox-go/opensandbox/internal/serverconfig"
	"github.com/opensandbox-go/opensandbox/internal/store"
)

func envOf(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestInitConfig(t *testing.T) {
	home := t.TempDir()
	env := envOf(map[string]string{"HOME": home})
	path := filepath.Join(home, serverconfig.DefaultConfigFile)

	var out bytes.Buffer
	code, err := run(context.Background(), []string{"init-config"}, env, &out)
	if code != 0 || err != nil {
		t.Fatalf("run(init-config) = %d, %v; want 0, nil", code, err)
	}
	if !strings.Contains(out.String(), path) {
		t.Errorf("run(init-config) output %q does not name %s", out.String(), path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("init-config wrote no %s: %v", path, err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode of %s = %v, want 0600", path, fi.Mode().Perm())
	}
	cfg, warnings, err := serverconfig.Load("", env)
	if err != nil || len(warnings) != 0 {
		t.Fatalf("Load(written file) = %v warnings, %v; want none, nil", warnings, err)
	}
	if len(cfg.Server.APIKey) < 20 || cfg.Path != path {
		t.Errorf("Load(written file): api key %q from %q, want a generated key from %s", cfg.Server.APIKey, cfg.Path, path)
	}
	firstKey := cfg.Server.APIKey

	// No overwrite without --force.
	code, err = run(context.Background(), []string{"init-config", "--example", "k8s"}, env, &out)
	if code != 1 || err == nil || !strings.Contains(err.Error(), "--force") {
		t.Errorf("run(init-config) over an existing file = %d, %v; want 1 and an error naming --force", code, err)
	}
	if cfg, _, _ := serverconfig.Load("", env); cfg.Server.APIKey != firstKey {
		t.Errorf("refused init-config changed the file")
	}

	code, err = run(context.Background(), []string{"init-config", "--force", "--example", "k8s"}, env, &out)
	if code != 0 || err != nil {
		t.Fatalf("run(init-config --force) = %d, %v; want 0, nil", code, err)
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), "\n[kubernetes]\n") {
		t.Errorf("init-config --example k8s wrote no Kubernetes example:\n%s", data)
	}
	if cfg, _, err := serverconfig.Load("", env); err != nil || cfg.Server.APIKey == firstKey {
		t.Errorf("Load(after --force) = key %q, %v; want a new key, nil", cfg.Server.APIKey, err)
	}
}

func TestInitConfigPath(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		args []string
		vars map[string]string
		want string
	}{
		{"argument", []string{"init-config", filepath.Join(dir, "a", "arg.toml")}, map[string]string{"HOME": dir}, filepath.Join(dir, "a", "arg.toml")},
		{"env", []string{"init-config"}, map[string]string{"HOME": dir, serverconfig.EnvConfigPath: filepath.Join(dir, "env.toml")}, filepath.Join(dir, "env.toml")},
		{"argument over env", []string{"init-config", filepath.Join(dir, "arg2.toml")}, map[string]string{"HOME": dir, serverconfig.EnvConfigPath: filepath.Join(dir, "unused.toml")}, filepath.Join(dir, "arg2.toml")},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		if code, err := run(context.Background(), tt.args, envOf(tt.vars), &out); code != 0 || err != nil {
			t.Errorf("%s: run(%q) = %d, %v; want 0, nil", tt.name, tt.args, code, err)
			continue
		}
		if _, err := os.Stat(tt.want); err != nil {
			t.Errorf("%s: run(%q) wrote no %s: %v", tt.name, tt.args, tt.want, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "unused.toml")); err == nil {
		t.Errorf("init-config with a path argument also wrote $%s", serverconfig.EnvConfigPath)
	}
}

// TestInitConfigFlagsAnywhere: flags go before or after the path, as in
// upstream's quickstart (init-config ~/.sandbox.toml --example docker).
func TestInitConfigFlagsAnywhere(t *testing.T) {
	dir := t.TempDir()
	env := envOf(map[string]string{"HOME": dir})
	tests := []struct {
		name, file string
		args       []string // the path is appended where "@" stands
		k8s        bool
	}{
		{"path first", "a.toml", []string{"@", "--example", "docker"}, false},
		{"path first, two flags", "b.toml", []string{"@", "--example", "k8s", "--force"}, true},
		{"path last", "c.toml", []string{"--example=k8s", "@"}, true},
		{"path between", "d.toml", []string{"--force", "@", "-example", "k8s"}, true},
		{"after --", "-e.toml", []string{"--example", "k8s", "--", "@"}, true},
	}
	for _, tt := range tests {
		path := filepath.Join(dir, tt.file)
		if tt.file[0] == '-' {
			// A path that looks like a flag can only follow "--".
			path = tt.file
			t.Chdir(dir)
		}
		args := []string{"init-config"}
		for _, a := range tt.args {
			if a == "@" {
				a = path
			}
			args = append(args, a)
		}
		var out bytes.Buffer
		if code, err := run(context.Background(), args, env, &out); code != 0 || err != nil {
			t.Errorf("%s: run(%q) = %d, %v; want 0, nil", tt.name, args, code, err)
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, tt.file))
		if err != nil {
			t.Errorf("%s: run(%q) wrote no %s: %v", tt.name, args, tt.file, err)
			continue
		}
		if got := strings.Contains(string(data), "\n[kubernetes]\n"); got != tt.k8s {
			t.Errorf("%s: run(%q) wrote the k8s example = %v, want %v", tt.name, args, got, tt.k8s)
		}
	}

	// "~/" is expanded when the shell did not (a quoted path).
	var out bytes.Buffer
	if code, err := run(context.Background(), []string{"init-config", "~/sub/tilde.toml", "--example", "docker"}, env, &out); code != 0 || err != nil {
		t.Fatalf("run(init-config ~/sub/tilde.toml) = %d, %v", code, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sub", "tilde.toml")); err != nil {
		t.Errorf("init-config ~/sub/tilde.toml did not write under HOME: %v", err)
	}
}

// TestInitConfigTellsWhereTheKeyIs checks the output names the file and
// table holding the key, and that the command it prints reads it back.
func TestInitConfigTellsWhereTheKeyIs(t *testing.T) {
	dir := t.TempDir()
	env := envOf(map[string]string{"HOME": dir})
	path := filepath.Join(dir, "with space", "server.toml")
	var out bytes.Buffer
	if code, err := run(context.Background(), []string{"init-config", path}, env, &out); code != 0 || err != nil {
		t.Fatalf("run(init-config) = %d, %v", code, err)
	}
	cfg, _, err := serverconfig.Load(path, env)
	if err != nil {
		t.Fatalf("Load(written file): %v", err)
	}
	text := out.String()
	for _, w := range []string{"api_key in the [server] table of " + path, serverconfig.EnvAPIKey, "OPEN-SANDBOX-API-KEY", "OPEN_SANDBOX_API_KEY", "--config '" + path + "'"} {
		if !strings.Contains(text, w) {
			t.Errorf("init-config output does not contain %q:\n%s", w, text)
		}
	}
	if strings.Contains(text, cfg.Server.APIKey) {
		t.Errorf("init-config printed the key itself:\n%s", text)
	}
	var export string
	for _, l := range strings.Split(text, "\n") {
		if s, ok := strings.CutPrefix(strings.TrimSpace(l), "export "); ok {
			export = s
		}
	}
	if export == "" {
		t.Fatalf("init-config output has no export line:\n%s", text)
	}
	got, err := osexec.Command("sh", "-c", export+` && printf %s "$OPEN_SANDBOX_API_KEY"`).Output()
	if err != nil || string(got) != cfg.Server.APIKey {
		t.Errorf("the printed command %q gives %q, %v; want the key in the file", export, got, err)
	}

	// At the default path the start hint needs no --config.
	out.Reset()
	if code, err := run(context.Background(), []string{"init-config"}, env, &out); code != 0 || err != nil {
		t.Fatalf("run(init-config) = %d, %v", code, err)
	}
	if !strings.Contains(out.String(), "start the server with: opensandbox-server\n") {
		t.Errorf("init-config at the default path:\n%s\nwant a start hint without --config", out.String())
	}
}

func TestUsageErrors(t *testing.T) {
	env := envOf(map[string]string{"HOME": t.TempDir()})
	for _, args := range [][]string{
		{"--no-such-flag"},
		{"serve"},
		{"init-config", "--example", "nomad"},
		{"init-config", "a.toml", "b.toml"},
		{"init-config", "a.toml", "--example", "docker", "b.toml"},
		{"init-config", "a.toml", "--no-such-flag"},
		{"init-config", "a.toml", "--example"},
	} {
		var out bytes.Buffer
		if code, err := run(context.Background(), args, env, &out); code != 2 || err == nil {
			t.Errorf("run(%q) = %d, %v; want 2 and an error", args, code, err)
		}
	}
}

func TestRunRefusesWithoutAPIKey(t *testing.T) {
	home := t.TempDir()
	var out bytes.Buffer
	code, err := run(context.Background(), nil, envOf(map[string]string{"HOME": home}), &out)
	if code != 1 || !errors.Is(err, serverconfig.ErrNoAPIKey) {
		t.Fatalf("run() without a key = %d, %v; want 1, ErrNoAPIKey", code, err)
	}
	for _, w := range []string{"[server]", "api_key", serverconfig.EnvAPIKey} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("run() error %q does not say how to set a key (%s)", err, w)
		}
	}
	// It stops before touching the store.
	if _, err := os.Stat(filepath.Join(home, ".opensandbox")); err == nil {
		t.Errorf("run() without a key created the store directory")
	}
}

func TestRunInvalidConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.toml")
	os.WriteFile(path, []byte("[runtime]\ntype = \"docker\"\n[server]\nport = 0\n"), 0o600)
	var out bytes.Buffer
	code, err := run(context.Background(), []string{"--config", path}, envOf(map[string]string{"HOME": dir}), &out)
	if code != 1 || err == nil || !strings.Contains(err.Error(), "server.port") {
		t.Errorf("run(--config bad) = %d, %v; want 1 and an error naming server.port", code, err)
	}
}

// serverConfigFile writes a config that passes Load, with the store and
// logs under dir.
func serverConfigFile(t *testing.T, dir string) string {
	t.Helper()
	execd := filepath.Join(dir, "execd")
	if err := os.WriteFile(execd, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "c.toml")
	body := "[server]\napi_key = \"k\"\nport = 1\n[runtime]\ntype = \"docker\"\nexecd_path = \"" + execd + "\"\n" +
		"[store]\npath = \"" + filepath.Join(dir, "store.db") + "\"\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRunUnreachableEngine(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(dir, "no-engine.sock"))
	t.Setenv("DOCKER_CERT_PATH", "")
	path := serverConfigFile(t, dir)
	var out bytes.Buffer
	code, err := run(context.Background(), []string{"--config", path}, envOf(map[string]string{"HOME": dir}), &out)
	if code != 1 || err == nil {
		t.Fatalf("run() with no engine = %d, %v; want 1 and an error", code, err)
	}
	for _, w := range []string{"dockerd", "DOCKER_HOST"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("run() with no engine: error %q does not mention %s", err, w)
		}
	}
}

func TestRunStoreLocked(t *testing.T) {
	dir := t.TempDir()
	path := serverConfigFile(t, dir)
	st, err := store.Open(store.Options{Path: filepath.Join(dir, "store.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var out bytes.Buffer
	code, err := run(context.Background(), []string{"--config", path}, envOf(map[string]string{"HOME": dir}), &out)
	if code != 1 || !errors.Is(err, store.ErrLocked) {
		t.Errorf("run() with the store held by another process = %d, %v; want 1, ErrLocked", code, err)
	}
}

func TestOpenAPIJSON(t *testing.T) {
	b, err := openAPIJSON(api.LifecycleYAML)
	if err != nil {
		t.Fatalf("openAPIJSON(api.LifecycleYAML): %v", err)
	}
	var doc struct {
		OpenAPI string                     `json:"openapi"`
		Paths   map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("openAPIJSON output is not JSON: %v", err)
	}
	if doc.OpenAPI == "" || len(doc.Paths) == 0 {
		t.Errorf("openAPIJSON: openapi %q with %d paths, want a version and paths", doc.OpenAPI, len(doc.Paths))
	}
	if _, err := openAPIJSON([]byte("not: [openapi")); err == nil {
		t.Errorf("openAPIJSON(bad YAML) succeeded, want an error")
	}
}

func TestServerStoreOverrides(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(store.Options{Path: filepath.Join(t.TempDir(), "s.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var s server.Store = serverStore{st}

	got, err := s.GetOverrides(ctx, "none")
	if err != nil || !reflect.DeepEqual(got, server.Overrides{}) {
		t.Errorf("GetOverrides(none) = %+v, %v; want zero value, nil", got, err)
	}
	exp := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	tests := []server.Overrides{
		{Metadata: map[string]string{"a": "b"}, ExpiresAt: &exp},
		{Metadata: map[string]string{}}, // every key deleted: must stay non-nil
		{ExpiresAt: &exp},
	}
	for _, want := range tests {
		if err := s.PutOverrides(ctx, "sbx", want); err != nil {
			t.Fatalf("PutOverrides(%+v): %v", want, err)
		}
		got, err := s.GetOverrides(ctx, "sbx")
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("GetOverrides after PutOverrides(%+v) = %+v, %v", want, got, err)
		}
	}
	if err := s.DeleteOverrides(ctx, "sbx"); err != nil {
		t.Fatalf("DeleteOverrides: %v", err)
	}
	if got, err := s.GetOverrides(ctx, "sbx"); err != nil || !reflect.DeepEqual(got, server.Overrides{}) {
		t.Errorf("GetOverrides after delete = %+v, %v; want zero value, nil", got, err)
	}
}

func TestFindExecd(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	got, err := findExecd("bin/execd")
	if want := filepath.Join(dir, "bin/execd"); err != nil || got != want {
		t.Errorf("findExecd(bin/execd) = %q, %v; want %q, nil", got, err, want)
	}

	pathDir := filepath.Join(dir, "path")
	os.Mkdir(pathDir, 0o755)
	execd := filepath.Join(pathDir, "execd")
	os.WriteFile(execd, []byte("#!/bin/sh\n"), 0o755)
	t.Setenv("PATH", pathDir)
	if got, err := findExecd(""); err != nil || got != execd {
		t.Errorf("findExecd(\"\") with execd in PATH = %q, %v; want %q, nil", got, err, execd)
	}
	t.Setenv("PATH", filepath.Join(dir, "empty"))
	if _, err := findExecd(""); err == nil || !strings.Contains(err.Error(), "execd_path") {
		t.Errorf("findExecd(\"\") with no execd anywhere: err = %v, want one naming execd_path", err)
	}
}

// TestInitConfigDocsOutput keeps the sample output in
// docs/configuration.md what init-config prints.
func TestInitConfigDocsOutput(t *testing.T) {
	page, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	const prompt = "$ opensandbox-server init-config ~/.sandbox.toml --example docker\n"
	_, rest, ok := strings.Cut(string(page), prompt)
	sample, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatalf("docs/configuration.md has no sample after %q", prompt)
	}
	home := t.TempDir()
	var out bytes.Buffer
	args := []string{"init-config", filepath.Join(home, ".sandbox.toml"), "--example", "docker"}
	if code, err := run(context.Background(), args, envOf(map[string]string{"HOME": home}), &out); code != 0 || err != nil {
		t.Fatalf("run(%q) = %d, %v", args, code, err)
	}
	if got := strings.ReplaceAll(out.String(), home, "/home/me"); got != sample {
		t.Errorf("init-config prints\n%s\ndocs/configuration.md shows\n%s", got, sample)
	}
}

func TestListenFlags(t *testing.T) {
	env := envOf(map[string]string{"HOME": t.TempDir()})
	for _, args := range [][]string{
		{"--port", "0"},
		{"--port", "70000"},
		{"--port", "http"},
		{"--host", ""},
		{"--host", "a b"},
	} {
		var out bytes.Buffer
		if code, err := run(context.Background(), args, env, &out); code != 2 || err == nil {
			t.Errorf("run(%q) = %d, %v; want 2 and an error", args, code, err)
		}
	}

	parse := func(args ...string) serverconfig.Config {
		t.Helper()
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		host := fs.String("host", "", "")
		port := fs.Int("port", 0, "")
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		cfg := serverconfig.Defaults(t.TempDir())
		if err := overrideListen(&cfg, fs, *host, *port); err != nil {
			t.Fatalf("overrideListen(%q) = %v", args, err)
		}
		return cfg
	}
	if got := parse("--host", "127.0.0.2", "--port", "9090").Server.Addr(); got != "127.0.0.2:9090" {
		t.Errorf("--host 127.0.0.2 --port 9090 listens on %s", got)
	}
	def := serverconfig.Defaults(t.TempDir()).Server.Addr()
	if got := parse().Server.Addr(); got != def {
		t.Errorf("no flags listens on %s, want the config's %s", got, def)
	}
}
