package serverconfig

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
)

// Load reads the configuration. path is the --config flag: when empty,
// SANDBOX_CONFIG_PATH is used, else ~/.sandbox.toml. A missing file is an
// error, except at the default path, where all defaults apply with
// runtime.type = "docker" (so the server runs out of the box).
//
// env looks up environment variables (os.Getenv in production): it
// supplies HOME, the config path, the API key override and the insecure
// switch. The returned warnings are for the log: accepted settings that
// are ignored or only fit for tests. The error lists every unknown key
// and every invalid value at once.
func Load(path string, env func(string) string) (Config, []string, error) {
	home, err := homeDir(env)
	if err != nil {
		return Config{}, nil, err
	}
	path, explicit := configPath(path, env, home)

	cfg := Defaults(home)
	var warnings, problems []string
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !explicit:
		cfg.Runtime.Type = RuntimeDocker
	case err != nil:
		return Config{}, nil, fmt.Errorf("config: %w", err)
	default:
		cfg.Path = path
		md, err := toml.Decode(string(data), &cfg)
		if err != nil {
			return Config{}, nil, fmt.Errorf("config %s: %w", path, err)
		}
		warnings, problems = checkUndecoded(&md, cfg.Runtime.Type)
		w, p := checkRuntimeKeys(&md, cfg.Runtime.Type)
		warnings, problems = append(warnings, w...), append(problems, p...)
		applyFileEnabled(&cfg, &md, home)
	}

	if key := env(EnvAPIKey); key != "" {
		cfg.Server.APIKey = key
	}
	switch v := env(EnvInsecure); {
	case v == "":
	case strings.EqualFold(v, "yes"):
		cfg.Insecure = true
	default:
		problems = append(problems, fmt.Sprintf("%s=%q: want YES or unset", EnvInsecure, v))
	}

	cfg.Log.FilePath = expandHome(cfg.Log.FilePath, home)
	cfg.Runtime.ExecdPath = expandHome(cfg.Runtime.ExecdPath, home)
	cfg.Egress.EgressPath = expandHome(cfg.Egress.EgressPath, home)
	cfg.Egress.UpstreamCAFile = expandHome(cfg.Egress.UpstreamCAFile, home)
	cfg.Store.Path = expandHome(cfg.Store.Path, home)
	cfg.Docker.SeccompProfile = expandHome(cfg.Docker.SeccompProfile, home)
	cfg.Kubernetes.KubeconfigPath = expandHome(cfg.Kubernetes.KubeconfigPath, home)
	cfg.Kubernetes.BatchSandboxTemplateFile = expandHome(cfg.Kubernetes.BatchSandboxTemplateFile, home)

	w, p := validate(&cfg)
	warnings = append(warnings, w...)
	problems = append(problems, p...)
	if len(problems) > 0 {
		where := cfg.Path
		if where == "" {
			where = "(defaults)"
		}
		return Config{}, nil, fmt.Errorf("config %s:\n  %s", where, strings.Join(problems, "\n  "))
	}
	return cfg, warnings, nil
}

// ConfigPath is the config file Load reads, and init-config writes, for
// path (the --config flag or init-config's argument): path itself, else
// SANDBOX_CONFIG_PATH, else ~/.sandbox.toml, with a leading "~/"
// expanded.
func ConfigPath(path string, env func(string) string) (string, error) {
	home, err := homeDir(env)
	if err != nil {
		return "", err
	}
	p, _ := configPath(path, env, home)
	return p, nil
}

// configPath is ConfigPath; explicit says whether the file was named (by
// path or the environment) rather than defaulted.
func configPath(path string, env func(string) string, home string) (string, bool) {
	explicit := true
	if path == "" {
		path = env(EnvConfigPath)
	}
	if path == "" {
		path, explicit = filepath.Join(home, DefaultConfigFile), false
	}
	return expandHome(path, home), explicit
}

// homeDir is $HOME, else the home directory of the current user (services
// started without HOME).
func homeDir(env func(string) string) (string, error) {
	if h := env("HOME"); h != "" {
		return h, nil
	}
	u, err := user.Current()
	if err != nil || u.HomeDir == "" {
		return "", fmt.Errorf("config: no home directory (set HOME): %v", err)
	}
	return u.HomeDir, nil
}

// applyFileEnabled applies upstream's [log] file_enabled switch.
func applyFileEnabled(cfg *Config, md *toml.MetaData, home string) {
	if cfg.Log.FileEnabled == nil {
		return
	}
	if !*cfg.Log.FileEnabled {
		cfg.Log.FilePath = ""
		return
	}
	if !md.IsDefined("log", "file_path") || cfg.Log.FilePath == "" {
		cfg.Log.FilePath = filepath.Join(home, "logs", "opensandbox", "server.log")
	}
}

func defaultStorePath(home string) string {
	return filepath.Join(home, ".opensandbox", "opensandbox.db")
}

func expandHome(p, home string) string {
	if p == "~" {
		return home
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		return filepath.Join(home, rest)
	}
	return p
}

// ignoredKeys are upstream keys we accept and ignore, with the reason
// logged when a file sets them.
var ignoredKeys = map[string]string{
	"server.timeout_keep_alive": "a setting of the upstream Python HTTP server",
	"server.limit_concurrency":  "a setting of the upstream Python HTTP server",
	"server.backlog":            "a setting of the upstream Python HTTP server",
	"server.thread_pool_size":   "a setting of the upstream Python HTTP server",
	"server.loop":               "a setting of the upstream Python HTTP server",
	"server.http":               "a setting of the upstream Python HTTP server",
	"log.access_file_path":      "access logs go to the same log as everything else",
	"log.file_max_bytes":        "the server does not rotate log files (use logrotate)",
	"log.file_backup_count":     "the server does not rotate log files (use logrotate)",
	"storage.ossfs_mount_root":  "OSSFS volumes are not supported",
}

// ignoredTables are upstream tables accepted and ignored as a whole.
var ignoredTables = map[string]string{
	"renew_intent": "renew intents are not supported yet",
}

// kubernetesOnly are upstream tables that only apply to runtime.type =
// kubernetes and that we do not implement there either, with the reason.
var kubernetesOnly = []struct{ table, why string }{
	{"agent_sandbox", "it configures kubernetes.workload_provider = \"agent-sandbox\", which is not supported"},
	{"ingress.gateway", "the ingress gateway is not supported yet"},
	{"ingress.secure_access", "the ingress gateway is not supported yet"},
}

// checkRuntimeKeys refuses the table of the runtime not in use ([docker]
// with kubernetes, [kubernetes] with docker) and warns about keys of the
// runtime's own that it ignores.
func checkRuntimeKeys(md *toml.MetaData, runtimeType string) (warnings, problems []string) {
	switch runtimeType {
	case RuntimeDocker:
		if md.IsDefined("kubernetes") {
			problems = append(problems, fmt.Sprintf("[kubernetes] is only valid with runtime.type = %q", RuntimeKubernetes))
		}
		if md.IsDefined("runtime", "execd_image") {
			warnings = append(warnings, "runtime.execd_image is ignored: on Docker execd comes from runtime.execd_path, not from an image")
		}
	case RuntimeKubernetes:
		if md.IsDefined("docker") {
			problems = append(problems, fmt.Sprintf("[docker] is only valid with runtime.type = %q: its settings do not apply to Kubernetes pods; remove the table", RuntimeDocker))
		}
		if md.IsDefined("runtime", "execd_path") {
			warnings = append(warnings, "runtime.execd_path is ignored: on Kubernetes execd comes from runtime.execd_image")
		}
		if md.IsDefined("kubernetes", "sandbox_create_poll_interval_seconds") {
			warnings = append(warnings, "kubernetes.sandbox_create_poll_interval_seconds is ignored: a create watches its sandbox instead of polling")
		}
	}
	return warnings, problems
}

// checkUndecoded sorts the keys the decoder did not use into warnings
// (ignored upstream keys) and problems (upstream Kubernetes tables we do
// not implement, unknown keys and tables). runtimeType is runtime.type.
func checkUndecoded(md *toml.MetaData, runtimeType string) (warnings, problems []string) {
	var unknown []string
	reported := map[string]bool{} // tables whose keys are not listed one by one
	for _, key := range md.Undecoded() {
		full := key.String()
		if within(full, reported) {
			continue
		}
		if why, ok := ignoredTables[key[0]]; ok {
			warnings = append(warnings, fmt.Sprintf("[%s] is ignored: %s", key[0], why))
			reported[key[0]] = true
			continue
		}
		if why, ok := ignoredKeys[full]; ok {
			warnings = append(warnings, fmt.Sprintf("%s is ignored: %s", full, why))
			continue
		}
		if t, why, ok := kubernetesTable(full); ok {
			if runtimeType == RuntimeKubernetes {
				problems = append(problems, fmt.Sprintf("[%s] is refused: %s", t, why))
			} else {
				problems = append(problems, fmt.Sprintf("[%s] is only valid with runtime.type = %q", t, RuntimeKubernetes))
			}
			reported[t] = true
			continue
		}
		name, parent := key[len(key)-1], strings.Join(key[:len(key)-1], ".")
		where := "at the top level"
		if parent != "" {
			where = "in [" + parent + "]"
		}
		if typ := md.Type(key...); typ == "Hash" || typ == "ArrayHash" {
			unknown = append(unknown, fmt.Sprintf("unknown table %q %s", name, where))
			reported[full] = true
			continue
		}
		unknown = append(unknown, fmt.Sprintf("unknown key %q %s", name, where))
	}
	sort.Strings(unknown)
	return warnings, append(problems, unknown...)
}

// within reports whether key is one of tables or lies inside one.
func within(key string, tables map[string]bool) bool {
	for t := range tables {
		if key == t || strings.HasPrefix(key, t+".") {
			return true
		}
	}
	return false
}

func kubernetesTable(key string) (table, why string, ok bool) {
	for _, t := range kubernetesOnly {
		if key == t.table || strings.HasPrefix(key, t.table+".") {
			return t.table, t.why, true
		}
	}
	return "", "", false
}
