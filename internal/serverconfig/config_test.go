package serverconfig

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// testEnv returns an env func over vars, with HOME set to a fresh
// directory (returned) unless vars sets it.
func testEnv(t *testing.T, vars map[string]string) (func(string) string, string) {
	t.Helper()
	home := t.TempDir()
	m := map[string]string{"HOME": home}
	for k, v := range vars {
		m[k] = v
	}
	return func(k string) string { return m[k] }, m["HOME"]
}

func writeConfig(t *testing.T, dir, body string) string {
	t.Helper()
	path := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// loadString loads body as the config file; the runtime table is added
// unless body has one.
func loadString(t *testing.T, body string, vars map[string]string) (Config, []string, error) {
	t.Helper()
	env, home := testEnv(t, vars)
	if !strings.Contains(body, "[runtime]") {
		body = "[runtime]\ntype = \"docker\"\n" + body
	}
	return Load(writeConfig(t, home, body), env)
}

func TestLoadNoFileAtDefaultPath(t *testing.T) {
	env, home := testEnv(t, nil)
	got, warnings, err := Load("", env)
	if err != nil {
		t.Fatalf("Load(\"\") with no ~/.sandbox.toml: %v", err)
	}
	want := Defaults(home)
	want.Runtime.Type = RuntimeDocker
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load(\"\") = %+v\nwant %+v", got, want)
	}
	if len(warnings) != 0 {
		t.Errorf("Load(\"\") warnings = %q, want none", warnings)
	}
	// Spot-check the documented defaults themselves.
	checks := []struct {
		name      string
		got, want any
	}{
		{"addr", got.Server.Addr(), "0.0.0.0:8080"},
		{"min timeout", got.Server.MinSandboxTimeout(), time.Minute},
		{"max timeout", got.Server.MaxSandboxTimeout(), time.Duration(0)},
		{"log level", got.Log.SlogLevel(), slog.LevelInfo},
		{"network", got.Docker.NetworkMode, "bridge"},
		{"isolate sandboxes", got.Docker.IsolateSandboxes, true},
		{"bridge network", got.Docker.BridgeNetwork, "opensandbox"},
		{"host ip", got.Docker.HostIP, "127.0.0.1"},
		{"published port range", got.Docker.PublishedPortRange, "20000-32767"},
		{"api timeout", got.Docker.APITimeout(), 180 * time.Second},
		{"no new privileges", got.Docker.NoNewPrivileges, true},
		{"pids", got.Docker.PidsLimit, int64(1024)},
		{"caps", len(got.Docker.DropCapabilities), 9},
		{"store type", got.Store.Type, "bbolt"},
		{"store path", got.Store.Path, filepath.Join(home, ".opensandbox", "opensandbox.db")},
		{"volume size", got.Storage.VolumeDefaultSize, "1Gi"},
		{"egress mode", got.Egress.Mode, "dns+nft"},
		{"disable ipv6", got.Egress.DisableIPv6, true},
		{"allow metadata", got.Egress.AllowMetadata, false},
		{"block metadata", got.Docker.BlockMetadata, true},
		{"ingress", got.Ingress.Mode, "direct"},
		{"path", got.Path, ""},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("default %s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestLoadMissingExplicitFile(t *testing.T) {
	env, home := testEnv(t, nil)
	missing := filepath.Join(home, "nope.toml")
	if _, _, err := Load(missing, env); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(%s): err = %v, want fs.ErrNotExist", missing, err)
	}
	env, _ = testEnv(t, map[string]string{EnvConfigPath: missing})
	if _, _, err := Load("", env); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(\"\") with %s=%s: err = %v, want fs.ErrNotExist", EnvConfigPath, missing, err)
	}
}

func TestLoadPathPrecedence(t *testing.T) {
	dir := t.TempDir()
	fromEnv := filepath.Join(dir, "env.toml")
	fromFlag := filepath.Join(dir, "flag.toml")
	for path, port := range map[string]string{fromEnv: "1111", fromFlag: "2222"} {
		if err := os.WriteFile(path, []byte("[runtime]\ntype = \"docker\"\n[server]\nport = "+port+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env, home := testEnv(t, map[string]string{EnvConfigPath: fromEnv})
	// A default file too, which both must win over.
	writeConfig(t, home, "")
	if err := os.Rename(filepath.Join(home, "config.toml"), filepath.Join(home, DefaultConfigFile)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		flag     string
		wantPort int
		wantPath string
	}{
		{"", 1111, fromEnv},
		{fromFlag, 2222, fromFlag},
	}
	for _, tt := range tests {
		cfg, _, err := Load(tt.flag, env)
		if err != nil {
			t.Fatalf("Load(%q): %v", tt.flag, err)
		}
		if cfg.Server.Port != tt.wantPort || cfg.Path != tt.wantPath {
			t.Errorf("Load(%q): port %d from %s, want %d from %s", tt.flag, cfg.Server.Port, cfg.Path, tt.wantPort, tt.wantPath)
		}
	}
}

func TestLoadDefaultPathFile(t *testing.T) {
	env, home := testEnv(t, nil)
	path := filepath.Join(home, DefaultConfigFile)
	if err := os.WriteFile(path, []byte("[runtime]\ntype = \"docker\"\n[server]\nport = 9000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := Load("", env)
	if err != nil || cfg.Server.Port != 9000 || cfg.Path != path {
		t.Errorf("Load(\"\") = port %d from %q, %v; want 9000 from %s, nil", cfg.Server.Port, cfg.Path, err, path)
	}
}

func TestLoadEveryKey(t *testing.T) {
	body := `
[server]
host = "127.0.0.1"
port = 9090
api_key = "secret"
eip = "sandbox.example.com"
max_sandbox_timeout_seconds = 7200
min_sandbox_timeout_seconds = 120
proxy_requires_api_key = false

[log]
level = "DEBUG"
file_path = "~/logs/server.log"

[runtime]
type = "docker"
execd_path = "~/bin/execd"

[docker]
network_mode = "host"
isolate_sandboxes = false
bridge_network = "osb-net"
block_metadata = false
host_ip = "10.0.0.5"
published_port_range = "40000-40999"
api_timeout = 30
drop_capabilities = ["NET_RAW"]
apparmor_profile = "docker-default"
no_new_privileges = false
seccomp_profile = "unconfined"
pids_limit = 100
warm_networks = 5
execd_copy = true

[storage]
allowed_host_paths = ["/data/", "/srv/shared"]
volume_default_size = "500Mi"

[store]
type = "bbolt"
path = "/var/lib/opensandbox/store.db"

[secure_runtime]
type = "gvisor"
docker_runtime = "runsc"
k8s_runtime_class = "gvisor"

[egress]
image = "example/egress:1"
mode = "dns+nft"
disable_ipv6 = false
allow_metadata = true

[ingress]
mode = "direct"

[debug]
enabled = true
address = "127.0.0.1:7070"
`
	env, home := testEnv(t, nil)
	path := writeConfig(t, home, body)
	got, _, err := Load(path, env)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := Config{
		Server: Server{Host: "127.0.0.1", Port: 9090, APIKey: "secret", EIP: "sandbox.example.com",
			MaxSandboxTimeoutSeconds: 7200, MinSandboxTimeoutSeconds: 120},
		Log:     Log{Level: "debug", FilePath: filepath.Join(home, "logs/server.log")},
		Runtime: Runtime{Type: "docker", ExecdPath: filepath.Join(home, "bin/execd"), ExecdImage: DefaultExecdImage},
		Docker: Docker{NetworkMode: "host", IsolateSandboxes: false, BridgeNetwork: "osb-net", HostIP: "10.0.0.5", PublishedPortRange: "40000-40999", APITimeoutSeconds: 30,
			DropCapabilities: []string{"NET_RAW"}, AppArmorProfile: "docker-default", NoNewPrivileges: false,
			SeccompProfile: "unconfined", PidsLimit: 100, WarmNetworks: 5, ExecdCopy: true},
		Kubernetes:    Defaults(home).Kubernetes,
		Storage:       Storage{AllowedHostPaths: []string{"/data", "/srv/shared"}, VolumeDefaultSize: "500Mi"},
		Store:         Store{Type: "bbolt", Path: "/var/lib/opensandbox/store.db"},
		SecureRuntime: SecureRuntime{Type: "gvisor", DockerRuntime: "runsc", K8sRuntimeClass: "gvisor"},
		Egress:        Egress{Image: "example/egress:1", Mode: "dns+nft", DisableIPv6: false, AllowMetadata: true},
		Ingress:       Ingress{Mode: "direct"},
		Debug:         Debug{Enabled: true, Address: "127.0.0.1:7070"},
		Path:          path,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load(every key) =\n%+v\nwant\n%+v", got, want)
	}
	if got.Log.SlogLevel() != slog.LevelDebug {
		t.Errorf("SlogLevel() = %v, want DEBUG", got.Log.SlogLevel())
	}
}

func TestLoadEmptyDropCapabilities(t *testing.T) {
	cfg, _, err := loadString(t, "[docker]\ndrop_capabilities = []\n", nil)
	if err != nil || len(cfg.Docker.DropCapabilities) != 0 {
		t.Errorf("Load(drop_capabilities = []) = %q, %v; want [], nil", cfg.Docker.DropCapabilities, err)
	}
	// The default list is not shared between loads.
	cfg.Docker.DropCapabilities = append(cfg.Docker.DropCapabilities[:0], "X")
	again, _, _ := loadString(t, "", nil)
	if !reflect.DeepEqual(again.Docker.DropCapabilities, DefaultDropCapabilities()) {
		t.Errorf("second Load drop_capabilities = %q, want the defaults", again.Docker.DropCapabilities)
	}
}

func TestLoadInvalidValues(t *testing.T) {
	tests := []struct {
		name string
		body string
		want []string // substrings of the error: the key and the value
	}{
		{"port zero", "[server]\nport = 0\n", []string{"server.port = 0"}},
		{"port too big", "[server]\nport = 70000\n", []string{"server.port = 70000"}},
		{"empty host", "[server]\nhost = \"\"\n", []string{`server.host = ""`}},
		{"eip with scheme", "[server]\neip = \"http://x\"\n", []string{`server.eip = "http://x"`}},
		{"eip with port", "[server]\neip = \"x:8080\"\n", []string{`server.eip = "x:8080"`}},
		{"max timeout below 60", "[server]\nmax_sandbox_timeout_seconds = 30\n", []string{"server.max_sandbox_timeout_seconds = 30"}},
		{"max timeout negative", "[server]\nmax_sandbox_timeout_seconds = -1\n", []string{"server.max_sandbox_timeout_seconds = -1"}},
		{"min timeout zero", "[server]\nmin_sandbox_timeout_seconds = 0\n", []string{"server.min_sandbox_timeout_seconds = 0"}},
		{"instance id upper case", "[server]\ninstance_id = \"Team_A\"\n", []string{"server.instance_id = \"Team_A\""}},
		{"instance id too long", "[server]\ninstance_id = \"" + strings.Repeat("a", 64) + "\"\n", []string{"server.instance_id"}},
		{"min above max", "[server]\nmax_sandbox_timeout_seconds = 100\nmin_sandbox_timeout_seconds = 200\n", []string{"server.min_sandbox_timeout_seconds = 200"}},
		{"api key with space", "[server]\napi_key = \" k\"\n", []string{"server.api_key"}},
		{"log level", "[log]\nlevel = \"loud\"\n", []string{`log.level = "loud"`}},
		{"debug address", "[debug]\nenabled = true\naddress = \"6060\"\n", []string{`debug.address = "6060"`}},
		{"runtime missing", "[runtime]\n", []string{"runtime.type is required"}},
		{"runtime unknown", "[runtime]\ntype = \"podman\"\n", []string{`runtime.type = "podman"`}},
		{"network mode container", "[docker]\nnetwork_mode = \"container:x\"\n", []string{`docker.network_mode = "container:x"`}},
		{"network mode none", "[docker]\nnetwork_mode = \"none\"\n", []string{`docker.network_mode = "none"`}},
		{"network mode empty", "[docker]\nnetwork_mode = \"\"\n", []string{`docker.network_mode = ""`}},
		{"bridge network default bridge", "[docker]\nbridge_network = \"bridge\"\n", []string{`docker.bridge_network = "bridge"`}},
		{"bridge network empty", "[docker]\nbridge_network = \"\"\n", []string{`docker.bridge_network = ""`}},
		{"bridge network bad name", "[docker]\nbridge_network = \"my net\"\n", []string{`docker.bridge_network = "my net"`}},
		{"host ip", "[docker]\nhost_ip = \"localhost\"\n", []string{`docker.host_ip = "localhost"`}},
		{"published port range", "[docker]\npublished_port_range = \"30000\"\n", []string{`docker.published_port_range = "30000"`}},
		{"published port range reversed", "[docker]\npublished_port_range = \"3-2\"\n", []string{`docker.published_port_range = "3-2"`}},
		{"published port range zero", "[docker]\npublished_port_range = \"0-10\"\n", []string{`docker.published_port_range = "0-10"`}},
		{"api timeout", "[docker]\napi_timeout = 0\n", []string{"docker.api_timeout = 0"}},
		{"capability", "[docker]\ndrop_capabilities = [\"NET_RAW\", \"bad cap\"]\n", []string{`docker.drop_capabilities[1] = "bad cap"`}},
		{"pids", "[docker]\npids_limit = -5\n", []string{"docker.pids_limit = -5"}},
		{"warm networks", "[docker]\nwarm_networks = -1\n", []string{"docker.warm_networks = -1"}},
		{"host path relative", "[storage]\nallowed_host_paths = [\"data\"]\n", []string{`storage.allowed_host_paths[0] = "data"`}},
		{"volume size", "[storage]\nvolume_default_size = \"lots\"\n", []string{`storage.volume_default_size = "lots"`}},
		{"volume size zero", "[storage]\nvolume_default_size = \"0Gi\"\n", []string{`storage.volume_default_size = "0Gi"`}},
		{"store sqlite", "[store]\ntype = \"sqlite\"\n", []string{`store.type = "sqlite"`, `"bbolt"`}},
		{"store path empty", "[store]\npath = \"\"\n", []string{`store.path = ""`}},
		{"secure runtime type", "[secure_runtime]\ntype = \"vm\"\n", []string{`secure_runtime.type = "vm"`}},
		{"secure runtime names without type", "[secure_runtime]\ndocker_runtime = \"runsc\"\n", []string{"secure_runtime.type is empty", `"runsc"`}},
		{"gvisor without docker runtime", "[secure_runtime]\ntype = \"gvisor\"\nk8s_runtime_class = \"gvisor\"\n", []string{`secure_runtime.type = "gvisor" needs secure_runtime.docker_runtime`}},
		{"kata without docker runtime", "[secure_runtime]\ntype = \"kata\"\n", []string{`secure_runtime.type = "kata" needs secure_runtime.docker_runtime`}},
		{"firecracker on docker", "[secure_runtime]\ntype = \"firecracker\"\nk8s_runtime_class = \"kata-fc\"\n", []string{`secure_runtime.type = "firecracker"`}},
		{"egress mode", "[egress]\nmode = \"nft\"\n", []string{`egress.mode = "nft"`}},
		{"egress deny webhook", "[egress]\ndeny_webhook = \"ftp://x\"\n", []string{`egress.deny_webhook = "ftp://x"`}},
		{"egress doh blocklist", "[egress]\ndoh_blocklist = [\"dns.google\"]\n", []string{`egress.doh_blocklist = "dns.google"`}},
		{"egress dns upstream", "[egress]\ndns_upstream = [\"resolver.example\"]\n", []string{`egress.dns_upstream = "resolver.example"`}},
		{"ingress gateway", "[ingress]\nmode = \"gateway\"\n", []string{`ingress.mode = "gateway"`, `runtime.type = "kubernetes"`}},
		{"ingress mode", "[ingress]\nmode = \"tunnel\"\n", []string{`ingress.mode = "tunnel"`}},
		{"kubernetes table", "[kubernetes]\nnamespace = \"x\"\n", []string{"[kubernetes] is only valid with runtime.type = \"kubernetes\""}},
		{"agent_sandbox table", "[agent_sandbox]\nshutdown_policy = \"Delete\"\n", []string{"[agent_sandbox] is only valid"}},
		{"ingress gateway table", "[ingress.gateway]\naddress = \"gw\"\n", []string{"[ingress.gateway] is only valid"}},
		{"wrong type", "[server]\nport = \"eighty\"\n", []string{"server.port"}},
		{"bad toml", "[server\n", []string{"config.toml"}},
		{"insecure env", "", []string{EnvInsecure + `="true"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var vars map[string]string
			if tt.name == "insecure env" {
				vars = map[string]string{EnvInsecure: "true"}
			}
			_, _, err := loadString(t, tt.body, vars)
			if err == nil {
				t.Fatalf("Load(%q) succeeded, want an error naming %q", tt.body, tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Load(%q) error = %q, want it to contain %q", tt.body, err, w)
				}
			}
		})
	}
}

func TestLoadReportsEveryProblem(t *testing.T) {
	_, _, err := loadString(t, "[server]\nport = 0\n[docker]\nhost_ip = \"x\"\n", nil)
	for _, w := range []string{"server.port = 0", `docker.host_ip = "x"`} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Load(two bad values) error = %v, want it to contain %q", err, w)
		}
	}
}

func TestLoadUnknownKeys(t *testing.T) {
	body := `
colour = "blue"
[server]
prot = 8080
[docker]
network = "bridge"
[docker.extra]
a = 1
b = 2
[sever]
host = "x"
[[plugins]]
name = "p"
[runtime]
type = "docker"
`
	_, _, err := loadString(t, body, nil)
	if err == nil {
		t.Fatalf("Load(unknown keys) succeeded, want an error")
	}
	for _, w := range []string{
		`unknown key "colour" at the top level`,
		`unknown key "prot" in [server]`,
		`unknown key "network" in [docker]`,
		`unknown table "extra" in [docker]`,
		`unknown table "sever" at the top level`,
		`unknown table "plugins" at the top level`,
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Load(unknown keys) error = %q, want it to contain %q", err, w)
		}
	}
	for _, notWant := range []string{`"a"`, `"host"`, `"name"`} {
		if strings.Contains(err.Error(), notWant) {
			t.Errorf("Load(unknown keys) error = %q, lists %s inside an unknown table", err, notWant)
		}
	}
}

func TestLoadIgnoredUpstreamKeys(t *testing.T) {
	body := `
[server]
backlog = 2048
loop = "auto"
[log]
file_max_bytes = 1000
[runtime]
type = "docker"
execd_image = "opensandbox/execd:v1.0.18"
[storage]
ossfs_mount_root = "/mnt/ossfs"
[renew_intent]
enabled = true
[renew_intent.redis]
dsn = "redis://x"
`
	_, warnings, err := loadString(t, body, nil)
	if err != nil {
		t.Fatalf("Load(upstream keys): %v", err)
	}
	joined := strings.Join(warnings, "\n")
	for _, w := range []string{"server.backlog", "server.loop", "log.file_max_bytes", "runtime.execd_image", "storage.ossfs_mount_root", "[renew_intent]"} {
		if !strings.Contains(joined, w) {
			t.Errorf("Load(upstream keys) warnings = %q, want one about %s", warnings, w)
		}
	}
	if n := strings.Count(joined, "renew_intent"); n != 1 {
		t.Errorf("Load(upstream keys) warns %d times about renew_intent, want once: %q", n, warnings)
	}
}

func TestLoadNetworkModes(t *testing.T) {
	tests := []struct {
		name, body         string
		wantMode, wantNet  string
		wantIsolate, quiet bool
	}{
		{"default", "", "bridge", "opensandbox", true, true},
		{"own bridge network name", "[docker]\nbridge_network = \"osb.sandboxes_1\"\n", "bridge", "osb.sandboxes_1", true, true},
		{"isolation off", "[docker]\nisolate_sandboxes = false\n", "bridge", "opensandbox", false, false},
		// Upstream's form: a custom network, whatever isolate_sandboxes says.
		{"custom network", "[docker]\nnetwork_mode = \"sandboxes\"\n", "sandboxes", "opensandbox", true, true},
		{"custom network without isolation", "[docker]\nnetwork_mode = \"sandboxes\"\nisolate_sandboxes = false\n", "sandboxes", "opensandbox", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, warnings, err := loadString(t, tt.body, nil)
			if err != nil {
				t.Fatalf("Load(%q): %v", tt.body, err)
			}
			d := cfg.Docker
			if d.NetworkMode != tt.wantMode || d.BridgeNetwork != tt.wantNet || d.IsolateSandboxes != tt.wantIsolate {
				t.Errorf("Load(%q) = network_mode %q bridge_network %q isolate_sandboxes %v; want %q %q %v",
					tt.body, d.NetworkMode, d.BridgeNetwork, d.IsolateSandboxes, tt.wantMode, tt.wantNet, tt.wantIsolate)
			}
			if tt.quiet && len(warnings) != 0 {
				t.Errorf("Load(%q) warnings = %q, want none", tt.body, warnings)
			}
		})
	}
	// init-config writes the keys with their defaults.
	text, err := Example(ExampleDocker)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"isolate_sandboxes = true", `bridge_network = "opensandbox"`} {
		if !strings.Contains(text, "\n"+line+" ") {
			t.Errorf("Example(docker) has no line %q:\n%s", line, text)
		}
	}
}

func TestLoadWarnings(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"short min timeout", "[server]\nmin_sandbox_timeout_seconds = 1\n", "tests only"},
		{"host network", "[docker]\nnetwork_mode = \"host\"\n", "host's network"},
		{"no isolation", "[docker]\nisolate_sandboxes = false\n", "can reach each other"},
		{"all interfaces", "[docker]\nhost_ip = \"0.0.0.0\"\n", "every interface"},
		{"open proxy", "[server]\nproxy_requires_api_key = false\n", "anyone who knows a sandbox id"},
		{"debug off loopback", "[debug]\nenabled = true\naddress = \"0.0.0.0:6060\"\n", "not a loopback address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, warnings, err := loadString(t, tt.body, nil)
			if err != nil {
				t.Fatalf("Load(%q): %v", tt.body, err)
			}
			if !strings.Contains(strings.Join(warnings, "\n"), tt.want) {
				t.Errorf("Load(%q) warnings = %q, want one containing %q", tt.body, warnings, tt.want)
			}
		})
	}
}

func TestLoadEnvOverrides(t *testing.T) {
	tests := []struct {
		name         string
		body         string
		vars         map[string]string
		wantKey      string
		wantInsecure bool
	}{
		{"file key", "[server]\napi_key = \"file\"\n", nil, "file", false},
		{"env key wins", "[server]\napi_key = \"file\"\n", map[string]string{EnvAPIKey: "env"}, "env", false},
		{"env key without file key", "", map[string]string{EnvAPIKey: "env"}, "env", false},
		{"insecure YES", "", map[string]string{EnvInsecure: "YES"}, "", true},
		{"insecure yes", "", map[string]string{EnvInsecure: "yes"}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, _, err := loadString(t, tt.body, tt.vars)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if cfg.Server.APIKey != tt.wantKey || cfg.Insecure != tt.wantInsecure {
				t.Errorf("Load with %v: api key %q insecure %v, want %q %v", tt.vars, cfg.Server.APIKey, cfg.Insecure, tt.wantKey, tt.wantInsecure)
			}
		})
	}
}

func TestLoadLogFileEnabled(t *testing.T) {
	tests := []struct {
		name, body, want string // want relative to home; "" = stderr
	}{
		{"path alone", "[log]\nfile_path = \"/var/log/s.log\"\n", "/var/log/s.log"},
		{"disabled wins over path", "[log]\nfile_enabled = false\nfile_path = \"/var/log/s.log\"\n", ""},
		{"enabled with path", "[log]\nfile_enabled = true\nfile_path = \"/var/log/s.log\"\n", "/var/log/s.log"},
		{"enabled without path", "[log]\nfile_enabled = true\n", "~/logs/opensandbox/server.log"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, home := testEnv(t, nil)
			cfg, _, err := Load(writeConfig(t, home, "[runtime]\ntype = \"docker\"\n"+tt.body), env)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if want := expandHome(tt.want, home); cfg.Log.FilePath != want {
				t.Errorf("Load(%q) log file = %q, want %q", tt.body, cfg.Log.FilePath, want)
			}
		})
	}
}

func TestExamples(t *testing.T) {
	runtimeOf := map[string]string{ExampleDocker: RuntimeDocker, ExampleKubernetes: RuntimeKubernetes}
	for _, kind := range []string{ExampleDocker, ExampleKubernetes} {
		for _, key := range []string{"", "k3y-\"quoted\""} {
			text, err := ExampleWithAPIKey(kind, key)
			if err != nil {
				t.Fatalf("ExampleWithAPIKey(%q, %q): %v", kind, key, err)
			}
			env, home := testEnv(t, nil)
			cfg, warnings, err := Load(writeConfig(t, home, text), env)
			if err != nil {
				t.Fatalf("Load(Example(%q)): %v", kind, err)
			}
			if len(warnings) != 0 {
				t.Errorf("Load(Example(%q)) warnings = %q, want none", kind, warnings)
			}
			if cfg.Server.APIKey != key {
				t.Errorf("Load(ExampleWithAPIKey(%q, %q)) api key = %q, want %q", kind, key, cfg.Server.APIKey, key)
			}
			// The example spells out the defaults.
			want := Defaults(home)
			want.Runtime.Type = runtimeOf[kind]
			want.Server.APIKey = key
			want.Path = cfg.Path
			if !reflect.DeepEqual(cfg, want) {
				t.Errorf("Load(Example(%q)) =\n%+v\nwant the defaults\n%+v", kind, cfg, want)
			}
		}
	}
	k8s, _ := Example(ExampleKubernetes)
	for _, want := range []string{"\ntype = \"kubernetes\" ", "\n[kubernetes]\n", "\nnamespace = \"default\" ", "\nexecd_image = "} {
		if !strings.Contains(k8s, want) {
			t.Errorf("Example(k8s) has no %q:\n%s", want, k8s)
		}
	}
	for _, notWant := range []string{"\n[docker]", "coming", "not supported yet;"} {
		if strings.Contains(k8s, notWant) {
			t.Errorf("Example(k8s) contains %q:\n%s", notWant, k8s)
		}
	}
	if docker, _ := Example(ExampleDocker); strings.Contains(docker, "[kubernetes]") {
		t.Errorf("Example(docker) has a [kubernetes] table:\n%s", docker)
	}
	if _, err := Example("nomad"); err == nil {
		t.Errorf("Example(nomad) succeeded, want an error")
	}
}

func TestRequireAPIKey(t *testing.T) {
	tests := []struct {
		name     string
		cfg      Config
		insecure bool
		wantErr  bool
	}{
		{"key", Config{Server: Server{APIKey: "k"}}, false, false},
		{"no key", Config{}, false, true},
		{"no key, flag", Config{}, true, false},
		{"no key, env", Config{Insecure: true}, false, false},
	}
	for _, tt := range tests {
		err := tt.cfg.RequireAPIKey(tt.insecure)
		if (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, ErrNoAPIKey)) {
			t.Errorf("%s: RequireAPIKey(%v) = %v, want error %v", tt.name, tt.insecure, err, tt.wantErr)
		}
		if err != nil {
			for _, w := range []string{"api_key", "[server]", EnvAPIKey, "--insecure"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: RequireAPIKey error %q does not mention %s", tt.name, err, w)
				}
			}
		}
	}
}
