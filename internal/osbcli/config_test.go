package osbcli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestResolvePrecedence(t *testing.T) {
	file := map[string]string{
		"connection.domain":          "file-host:1",
		"connection.api_key":         "file-key",
		"connection.request_timeout": "12",
		"connection.protocol":        "https",
		"defaults.image":             "file/image",
	}
	env := map[string]string{
		"OPEN_SANDBOX_DOMAIN":  "env-host:2",
		"OPEN_SANDBOX_API_KEY": "env-key",
	}
	flags := map[string]string{"domain": "flag-host:3"}

	tests := []struct {
		name       string
		key        string
		want       string
		wantSource string
	}{
		{"flag beats env and file", "connection.domain", "flag-host:3", sourceFlag},
		{"env beats file", "connection.api_key", "env-key", sourceEnv},
		{"file beats default", "connection.request_timeout", "12", sourceFile},
		{"file only", "connection.protocol", "https", sourceFile},
		{"default", "connection.use_server_proxy", "false", sourceDefault},
		{"default timeout", "defaults.timeout", "10m", sourceDefault},
	}
	s, err := resolve(configInputs{flags: flags, env: envOf(env), file: file, path: "cfg.toml"})
	if err != nil {
		t.Fatalf("resolve: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := s.values[tt.key]; got != tt.want {
				t.Errorf("%s = %q, want %q", tt.key, got, tt.want)
			}
			if got := s.sources[tt.key]; got != tt.wantSource {
				t.Errorf("source of %s = %q, want %q", tt.key, got, tt.wantSource)
			}
		})
	}
	if s.Domain != "flag-host:3" || s.APIKey != "env-key" || s.RequestTimeout != 12*time.Second || s.Protocol != "https" || s.DefaultImage != "file/image" {
		t.Errorf("typed settings = %+v", s)
	}
}

func TestResolveEmptyEnvDoesNotOverride(t *testing.T) {
	s, err := resolve(configInputs{env: envOf(map[string]string{"OPEN_SANDBOX_DOMAIN": ""}), file: map[string]string{"connection.domain": "f:1"}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Domain != "f:1" {
		t.Errorf("Domain = %q, want f:1 (an empty variable does not count)", s.Domain)
	}
}

func TestResolveColor(t *testing.T) {
	tests := []struct {
		name  string
		flags map[string]string
		env   map[string]string
		file  map[string]string
		want  bool
	}{
		{"default on", nil, nil, nil, true},
		{"file off", nil, nil, map[string]string{"output.color": "false"}, false},
		{"--no-color", map[string]string{"no-color": "true"}, nil, nil, false},
		{"NO_COLOR", nil, map[string]string{"NO_COLOR": "1"}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := resolve(configInputs{flags: tt.flags, env: envOf(tt.env), file: tt.file})
			if err != nil {
				t.Fatal(err)
			}
			if s.Color != tt.want {
				t.Errorf("Color = %v, want %v", s.Color, tt.want)
			}
		})
	}
}

func TestResolveRejectsBadValues(t *testing.T) {
	tests := []struct {
		name  string
		in    configInputs
		wants []string // substrings of the error
	}{
		{"bad protocol flag", configInputs{flags: map[string]string{"protocol": "ftp"}}, []string{"connection.protocol", "--protocol", "ftp"}},
		{"bad timeout env", configInputs{env: envOf(map[string]string{"OPEN_SANDBOX_REQUEST_TIMEOUT": "soon"})}, []string{"request_timeout", "OPEN_SANDBOX_REQUEST_TIMEOUT"}},
		{"bad bool file", configInputs{file: map[string]string{"connection.use_server_proxy": "maybe"}, path: "c.toml"}, []string{"use_server_proxy", "c.toml"}},
		{"bad sandbox timeout", configInputs{file: map[string]string{"defaults.timeout": "-5m"}}, []string{"defaults.timeout"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := resolve(tt.in)
			if err == nil {
				t.Fatal("resolve succeeded, want an error")
			}
			for _, w := range tt.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("resolve error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestReadConfigFileUnknownKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(path, []byte("[connection]\ndomain = \"h:1\"\napi_kee = \"x\"\n[extra]\nfoo = 1\n"), 0o600)
	_, err := readConfigFile(path, true)
	if err == nil {
		t.Fatal("readConfigFile accepted unknown keys")
	}
	for _, w := range []string{"connection.api_kee", "extra.foo"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not name %s", err, w)
		}
	}
}

func TestReadConfigFileTypes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(path, []byte(configTemplate), 0o600)
	got, err := readConfigFile(path, true)
	if err != nil {
		t.Fatalf("the config init template does not load: %v", err)
	}
	want := map[string]string{
		"connection.domain": "localhost:8080", "connection.protocol": "http", "connection.request_timeout": "30",
		"connection.use_server_proxy": "false", "output.color": "true", "defaults.timeout": "10m",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if _, err := readConfigFile(filepath.Join(t.TempDir(), "missing.toml"), false); err != nil {
		t.Errorf("a missing default config file is an error: %v", err)
	}
	if _, err := readConfigFile(filepath.Join(t.TempDir(), "missing.toml"), true); err == nil {
		t.Error("a missing --config file is no error")
	}
}

func TestSetConfigValue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "config.toml")
	for _, kv := range [][2]string{{"domain", "h:9"}, {"connection.use_server_proxy", "true"}, {"request_timeout", "45"}, {"defaults.timeout", "none"}} {
		if _, err := setConfigValue(path, kv[0], kv[1]); err != nil {
			t.Fatalf("setConfigValue(%s, %s): %v", kv[0], kv[1], err)
		}
	}
	got, err := readConfigFile(path, true)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"connection.domain": "h:9", "connection.use_server_proxy": "true", "connection.request_timeout": "45", "defaults.timeout": "none"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("config file mode = %v, %v; want 0600", st.Mode().Perm(), err)
	}
	for _, bad := range [][2]string{{"nope", "1"}, {"protocol", "ftp"}, {"output.color", "sometimes"}, {"request_timeout", "-1"}, {"defaults.timeout", "0"}} {
		if _, err := setConfigValue(path, bad[0], bad[1]); err == nil {
			t.Errorf("setConfigValue(%s, %s) succeeded, want an error", bad[0], bad[1])
		}
	}
}

func TestParseSandboxTimeout(t *testing.T) {
	tests := []struct {
		in   string
		d    time.Duration
		none bool
		ok   bool
	}{
		{"10m", 10 * time.Minute, false, true},
		{"600", 10 * time.Minute, false, true},
		{"none", 0, true, true},
		{"NONE", 0, true, true},
		{"0", 0, false, false},
		{"-1m", 0, false, false},
		{"soon", 0, false, false},
	}
	for _, tt := range tests {
		d, none, err := parseSandboxTimeout(tt.in)
		if (err == nil) != tt.ok || d != tt.d || none != tt.none {
			t.Errorf("parseSandboxTimeout(%q) = %v, %v, %v; want %v, %v, ok=%v", tt.in, d, none, err, tt.d, tt.none, tt.ok)
		}
	}
}
