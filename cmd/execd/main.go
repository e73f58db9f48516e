// Command execd is the daemon inside every sandbox: it runs commands, bash
// sessions, code interpreter contexts and terminals, serves files and
// metrics, and proxies to ports inside the sandbox. With "-- entrypoint..." it also supervises the
// sandbox's own entrypoint. See docs/execd.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/execd/code"
	"github.com/opensandbox-go/opensandbox/internal/execd/command"
	"github.com/opensandbox-go/opensandbox/internal/execd/files"
	"github.com/opensandbox-go/opensandbox/internal/execd/isolation"
	"github.com/opensandbox-go/opensandbox/internal/execd/metrics"
	"github.com/opensandbox-go/opensandbox/internal/execd/proc"
	"github.com/opensandbox-go/opensandbox/internal/execd/procenv"
	"github.com/opensandbox-go/opensandbox/internal/execd/proxy"
	"github.com/opensandbox-go/opensandbox/internal/execd/pty"
	"github.com/opensandbox-go/opensandbox/internal/execd/readiness"
	"github.com/opensandbox-go/opensandbox/internal/execd/server"
	"github.com/opensandbox-go/opensandbox/internal/execd/session"
	"github.com/opensandbox-go/opensandbox/internal/execd/supervisor"
	"github.com/opensandbox-go/opensandbox/internal/execd/trust"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

type config struct {
	addr        string
	port        int
	accessToken string
	claimToken  string
	logLevel    int
	grace       time.Duration
	envFile     string
	logFile     string
	entrypoint  []string
	serverArgs  []string
}

func main() {
	tuneGC(os.LookupEnv)
	if len(os.Args) == 2 && os.Args[1] == holdArg {
		os.Exit(hold())
	}
	if len(os.Args) == 3 && os.Args[1] == installArg {
		if err := install(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "execd install:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// A session of the isolated execution API re-executes execd as its
	// init and in-session server.
	if code, ok := isolation.RunHelper(os.Args); ok {
		os.Exit(code)
	}
	code, err := run(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "execd:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// gcPercent is execd's GOGC unless its environment sets one. execd lives
// in every sandbox, where its memory counts against the sandbox's limit,
// and its live heap is about 1 MiB: at the default of 100 the runtime
// lets the heap reach its minimum goal of 4 MiB before collecting, and
// keeps most of that resident when idle; at 50 the goal is 2 MiB. A
// collection of so small a heap takes well under a millisecond, so the
// extra ones cost next to nothing. This is what keeps execd's idle RSS
// within its budget since client_golang (and the protobuf runtime it
// brings) added 2.4 MB to the binary (see docs/execd.md).
const gcPercent = 50

// tuneGC sets execd's GC percentage to gcPercent unless GOGC is set.
func tuneGC(lookupEnv func(string) (string, bool)) {
	if _, set := lookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
}

func parseFlags(args []string) (config, error) {
	flagArgs, entrypoint := supervisor.SplitArgs(args)
	var c config
	fs := flag.NewFlagSet("execd", flag.ContinueOnError)
	fs.StringVar(&c.addr, "addr", "", "listen address (host:port); overrides --port (env EXECD_ADDR)")
	fs.IntVar(&c.port, "port", 44772, "TCP port to listen on (env EXECD_PORT)")
	fs.StringVar(&c.accessToken, "access-token", "", "require this token in "+sandbox.AccessTokenHeader+" (env EXECD_ACCESS_TOKEN)")
	fs.StringVar(&c.claimToken, "claim-token", "", "start unclaimed, for a pool's pod: serve only POST /claim with this token, which sets the access token (env EXECD_CLAIM_TOKEN)")
	fs.IntVar(&c.logLevel, "log-level", 6, "log verbosity 0-7: 7 debug, 5-6 info, 4 warning, 0-3 error (env EXECD_LOG_LEVEL)")
	fs.DurationVar(&c.grace, "graceful-shutdown-timeout", time.Second, "how long open requests may finish at shutdown (env EXECD_API_GRACE_SHUTDOWN)")
	fs.StringVar(&c.envFile, "envs-file", procenv.DefaultEnvFile, "KEY=VALUE file added to every process's environment (env EXECD_ENVS)")
	fs.StringVar(&c.logFile, "log-file", "", "append logs to this file instead of stderr (env EXECD_LOG_FILE)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: execd [flags] [-- entrypoint args...]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(flagArgs); err != nil {
		return c, err
	}
	if err := applyEnv(fs, flagEnv); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q (put the entrypoint after --)", fs.Arg(0))
	}
	if c.accessToken != "" && c.claimToken != "" {
		return c, fmt.Errorf("--access-token and --claim-token exclude each other (a claim sets the access token)")
	}
	if c.port < 1 || c.port > 65535 {
		return c, fmt.Errorf("--port %d out of range 1-65535", c.port)
	}
	if c.logLevel < 0 || c.logLevel > 7 {
		return c, fmt.Errorf("--log-level %d out of range 0-7", c.logLevel)
	}
	if c.addr == "" {
		c.addr = ":" + strconv.Itoa(c.port)
	}
	c.entrypoint = entrypoint
	c.serverArgs = flagArgs
	return c, nil
}

func run(args []string) (int, error) {
	cfg, err := parseFlags(args)
	if err != nil {
		return 2, err
	}
	logger, closeLog, err := newLogger(cfg)
	if err != nil {
		return 1, err
	}
	defer closeLog()
	slog.SetDefault(logger)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	// Before anything else starts: with isolated execution enabled, the
	// runtime starts execd with CAP_SYS_ADMIN, which it uses once and drops.
	if err := isolation.Bootstrap(); err != nil {
		return 1, err
	}
	// Threads made now are execd's for good; a fork bomb at the pids
	// limit cannot then starve the Go runtime of one (see proc).
	proc.ReserveThreads(proc.ThreadBudget())
	supervised := supervisor.IsSupervisedServer()
	// The marker and the token are for execd alone: the commands it runs
	// and the entrypoint must not see them.
	os.Unsetenv(supervisor.ServerMarkerEnv)
	os.Unsetenv("EXECD_ACCESS_TOKEN")
	os.Unsetenv("EXECD_CLAIM_TOKEN")
	if cfg.claimToken != "" {
		// The claim token is every pod of the pool's: once the pod serves a
		// sandbox, its code must not read it from this process's
		// environment or memory (non-dumpable: /proc/<pid>/environ and mem
		// need CAP_SYS_PTRACE, which sandboxes lack).
		if err := proc.SetNonDumpable(); err != nil {
			return 1, fmt.Errorf("protect the claim token: %w", err)
		}
	}
	readyMarker := os.Getenv(readiness.MarkerEnv)
	os.Unsetenv(readiness.MarkerEnv)
	if !supervised {
		installEgressCA(logger)
	}
	if len(cfg.entrypoint) > 0 && !supervised {
		// The supervisor handles signals itself and must not start
		// children through os/exec (its reaper would steal their status).
		stop()
		serverEnv := os.Environ()
		if cfg.accessToken != "" {
			serverEnv = append(serverEnv, "EXECD_ACCESS_TOKEN="+cfg.accessToken)
		}
		if cfg.claimToken != "" {
			serverEnv = append(serverEnv, "EXECD_CLAIM_TOKEN="+cfg.claimToken)
		}
		if readyMarker != "" {
			serverEnv = append(serverEnv, readiness.MarkerEnv+"="+readyMarker)
		}
		return supervisor.Run(context.Background(), supervisor.Config{
			Entrypoint: cfg.entrypoint,
			Env:        os.Environ(),
			ServerArgs: cfg.serverArgs,
			ServerEnv:  serverEnv,
			Logger:     logger,
		})
	}
	return 0, serve(ctx, cfg, logger, readyMarker)
}

// installEgressCA trusts the egress sidecar's CA (given by the runtime when
// the credential proxy is on) in the image's bundles and exports the
// variables that point clients at it, before any process starts. A failure
// is logged, not fatal: HTTPS through the proxy then fails verification,
// which is visible and safe. Without the credential proxy it removes a CA
// an earlier sandbox left in the image (a snapshot of one with the proxy).
func installEgressCA(logger *slog.Logger) {
	ca := os.Getenv(egressCAEnv)
	if ca == "" {
		changed, err := trust.Remove(nil)
		if len(changed) > 0 {
			logger.Info("removed the egress CA an earlier sandbox left in the image", "bundles", changed)
		}
		if err != nil {
			logger.Warn("cannot remove the egress CA an earlier sandbox left in the image", "err", err)
		}
		return
	}
	res, err := trust.Install(ca, nil, os.TempDir(), os.Getenv)
	if err != nil {
		logger.Error("cannot trust the egress CA; HTTPS through the credential proxy will fail verification", "ca", ca, "err", err)
		return
	}
	for k, v := range res.Env {
		os.Setenv(k, v)
	}
	for _, err := range res.Errors {
		logger.Warn("a CA bundle of the image does not trust the egress CA", "err", err)
	}
	logger.Info("egress CA trusted", "bundles", res.Updated)
}

const egressCAEnv = "OPENSANDBOX_EGRESS_CA_FILE"

// serve runs the API server. With a readiness marker it writes
// readiness.Line(marker) to standard error once the socket listens (the
// runtime waits for that line instead of polling).
func serve(ctx context.Context, cfg config, logger *slog.Logger, readyMarker string) error {
	env := procenv.Builder{EnvFile: cfg.envFile}
	cmds, err := command.New(command.Options{Env: env, Logger: logger})
	if err != nil {
		return err
	}
	mc, err := metrics.New(metrics.Options{Logger: logger})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := server.New(server.Config{
		AccessToken: cfg.accessToken,
		ClaimToken:  cfg.claimToken,
		Logger:      logger,
		Port:        ln.Addr().(*net.TCPAddr).Port,
		Commands:    cmds,
		Sessions:    session.New(session.Options{Env: env, Logger: logger}),
		Code:        code.New(code.Options{Env: env, Logger: logger}),
		Files:       files.New(files.Options{Logger: logger}),
		Metrics:     mc,
		PTY:         pty.New(pty.Options{Env: env, Logger: logger}),
		Proxy:       proxy.New(proxy.Options{StripHeaders: []string{sandbox.AccessTokenHeader}, Logger: logger}),
		Isolated:    isolation.New(isolation.Options{Env: env, Logger: logger}),
	})
	logger.Info("execd listening", "addr", ln.Addr().String(), "auth", cfg.accessToken != "", "claim", cfg.claimToken != "")
	// Told to stop while starting (the supervisor stops the server when
	// the entrypoint cannot start): not ready, or the runtime would take
	// a sandbox that is going away for a started one.
	if ctx.Err() != nil {
		ln.Close()
		return nil
	}
	if readyMarker != "" {
		// Connections queue on the listening socket until Serve accepts.
		if _, err := io.WriteString(os.Stderr, readiness.Line(readyMarker)); err != nil {
			logger.Warn("cannot announce readiness on stderr; the runtime falls back to probing", "err", err)
		}
	}
	return srv.Serve(ctx, ln, cfg.grace)
}

func newLogger(cfg config) (*slog.Logger, func(), error) {
	var out io.Writer = os.Stderr
	closeFn := func() {}
	if cfg.logFile != "" {
		f, err := os.OpenFile(cfg.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, nil, fmt.Errorf("open log file: %w", err)
		}
		out, closeFn = f, func() { f.Close() }
	}
	var level slog.Level
	switch {
	case cfg.logLevel >= 7:
		level = slog.LevelDebug
	case cfg.logLevel >= 5:
		level = slog.LevelInfo
	case cfg.logLevel == 4:
		level = slog.LevelWarn
	default:
		level = slog.LevelError
	}
	return slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: level})), closeFn, nil
}

// flagEnv maps flags to the environment variables that set them when the
// flag is not given on the command line.
var flagEnv = map[string]string{
	"addr":                      "EXECD_ADDR",
	"port":                      "EXECD_PORT",
	"access-token":              "EXECD_ACCESS_TOKEN",
	"claim-token":               "EXECD_CLAIM_TOKEN",
	"log-level":                 "EXECD_LOG_LEVEL",
	"graceful-shutdown-timeout": "EXECD_API_GRACE_SHUTDOWN",
	"envs-file":                 "EXECD_ENVS",
	"log-file":                  "EXECD_LOG_FILE",
}

// applyEnv sets unset flags from their environment variables; an invalid
// value is an error, not silently ignored.
func applyEnv(fs *flag.FlagSet, mapping map[string]string) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for name, key := range mapping {
		v, ok := os.LookupEnv(key)
		if !ok || v == "" || given[name] {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			return fmt.Errorf("invalid %s=%q: %w", key, v, err)
		}
	}
	return nil
}
