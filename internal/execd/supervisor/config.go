package supervisor

import (
	"log/slog"
	"os"
	"strings"
	"time"
)

// ServerMarkerEnv is set to "1" in the environment of the server child so that
// execd's main can tell it is the supervised API server and must not supervise
// again.
const ServerMarkerEnv = "EXECD_SUPERVISED_SERVER"

// DefaultServerPath re-executes the running binary as the server.
const DefaultServerPath = "/proc/self/exe"

// DefaultStopGrace is how long a child gets between SIGTERM and SIGKILL.
const DefaultStopGrace = 10 * time.Second

// Exit codes Run returns when the entrypoint never ran; they follow the
// shell and docker conventions.
const (
	exitSupervisorFailure = 125 // the supervisor itself could not work
	exitNotExecutable     = 126 // the entrypoint exists but cannot be executed
	exitNotFound          = 127 // the entrypoint does not exist
)

// Config describes the two children of the supervisor. Only Entrypoint is
// required.
type Config struct {
	// Entrypoint is the user's argv. Required. Entrypoint[0] without a slash
	// is looked up in the PATH of Env (a standard PATH if Env has none);
	// a relative path is taken relative to Dir.
	Entrypoint []string
	// Env is the entrypoint's environment; nil means os.Environ(). Any
	// ServerMarkerEnv entry is removed.
	Env []string
	// Dir is the entrypoint's working directory; "" inherits execd's.
	Dir string

	// ServerPath is the binary run as the API server; "" means
	// DefaultServerPath. With the default, the server's argv[0] is
	// os.Args[0]; otherwise it is ServerPath.
	ServerPath string
	// ServerArgs is the server's argv[1:] (execd's own flags, without "--").
	ServerArgs []string
	// ServerEnv is the server's environment; nil means os.Environ().
	// ServerMarkerEnv=1 is always appended.
	ServerEnv []string

	// StopGrace is how long the entrypoint, and then the server, may take to
	// exit after SIGTERM before they get SIGKILL; <= 0 means
	// DefaultStopGrace.
	StopGrace time.Duration
	// Logger receives the supervisor's events; nil means slog.Default().
	Logger *slog.Logger
}

// IsSupervisedServer reports whether this process is the server child of a
// supervisor, that is whether ServerMarkerEnv is "1" in its environment.
func IsSupervisedServer() bool {
	return os.Getenv(ServerMarkerEnv) == "1"
}

// withDefaults returns cfg with every empty optional field filled in.
func (cfg Config) withDefaults() Config {
	if cfg.ServerPath == "" {
		cfg.ServerPath = DefaultServerPath
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = DefaultStopGrace
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg
}

// serverArgv is the argv of the server child.
func (cfg Config) serverArgv() []string {
	argv0 := cfg.ServerPath
	if argv0 == DefaultServerPath && len(os.Args) > 0 {
		argv0 = os.Args[0]
	}
	return append([]string{argv0}, cfg.ServerArgs...)
}

// serverEnv is the environment of the server child, marker included.
func (cfg Config) serverEnv() []string {
	base := cfg.ServerEnv
	if base == nil {
		base = os.Environ()
	}
	return append(withoutVar(base, ServerMarkerEnv), ServerMarkerEnv+"=1")
}

// entrypointEnv is the environment of the entrypoint, marker removed.
func (cfg Config) entrypointEnv() []string {
	base := cfg.Env
	if base == nil {
		base = os.Environ()
	}
	return withoutVar(base, ServerMarkerEnv)
}

// withoutVar returns a copy of env without the entries for name.
func withoutVar(env []string, name string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k == name {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// lookupVar returns the value of the last entry for name in env.
func lookupVar(env []string, name string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}
