// Command opensandbox-server is the lifecycle server: the OpenSandbox
// lifecycle API (create, list, pause, resume, renew, delete sandboxes,
// endpoints, snapshots) over a sandbox runtime (Docker today).
//
//	opensandbox-server [--config path] [--insecure]
//	opensandbox-server init-config [path] [--example docker|k8s] [--force]
//
// It reads ~/.sandbox.toml (or SANDBOX_CONFIG_PATH, or --config); see
// docs/configuration.md. This package only wires: configuration comes
// from internal/serverconfig, state from internal/store, sandboxes from
// internal/runtime/docker and the API from internal/server.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/opensandbox-go/opensandbox/api"
	"github.com/opensandbox-go/opensandbox/internal/grammar"
	"github.com/opensandbox-go/opensandbox/internal/httpmw"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/internal/runtime/docker"
	"github.com/opensandbox-go/opensandbox/internal/server"
	"github.com/opensandbox-go/opensandbox/internal/serverconfig"
	"github.com/opensandbox-go/opensandbox/internal/store"
)

// shutdownTimeout bounds the graceful shutdown after SIGTERM/SIGINT.
const shutdownTimeout = 10 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	go func() {
		// A second signal during the graceful shutdown kills the process.
		<-ctx.Done()
		stop()
	}()
	code, err := run(ctx, os.Args[1:], os.Getenv, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "opensandbox-server:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// run is the whole program; it returns the exit code (2 for usage
// errors) and the error to print.
func run(ctx context.Context, args []string, env func(string) string, stdout io.Writer) (int, error) {
	if len(args) > 0 && args[0] == "init-config" {
		return initConfig(args[1:], env, stdout)
	}
	fs := flag.NewFlagSet("opensandbox-server", flag.ContinueOnError)
	configPath := fs.String("config", "", "config file (default $"+serverconfig.EnvConfigPath+", else ~/"+serverconfig.DefaultConfigFile+")")
	insecure := fs.Bool("insecure", false, "allow starting without an API key (also "+serverconfig.EnvInsecure+"=YES)")
	// --host and --port override [server] host/port, so one config file
	// (the tracked deploy/dev.toml, say) serves on any address.
	host := fs.String("host", "", "listen address; overrides [server] host")
	port := fs.Int("port", 0, "listen port; overrides [server] port")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: opensandbox-server [--config path] [--host addr] [--port n] [--insecure]")
		fmt.Fprintln(fs.Output(), "       opensandbox-server init-config [path] [--example docker|k8s] [--force]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, nil
		}
		return 2, err
	}
	if fs.NArg() > 0 {
		return 2, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}

	cfg, warnings, err := serverconfig.Load(*configPath, env)
	if err != nil {
		return 1, err
	}
	if err := overrideListen(&cfg, fs, *host, *port); err != nil {
		return 2, err
	}
	logger, closeLog, err := newLogger(cfg.Log)
	if err != nil {
		return 1, err
	}
	defer closeLog()
	slog.SetDefault(logger)
	for _, w := range warnings {
		logger.Warn("config: " + w)
	}
	if cfg.Path == "" {
		logger.Info("no config file: using defaults", "path", "~/"+serverconfig.DefaultConfigFile)
	}
	if err := cfg.RequireAPIKey(*insecure); err != nil {
		return 1, err
	}
	if err := serve(ctx, cfg, logger); err != nil {
		return 1, err
	}
	return 0, nil
}

// overrideListen applies the --host and --port flags that were given.
func overrideListen(cfg *serverconfig.Config, fs *flag.FlagSet, host string, port int) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "host":
			if host == "" || strings.ContainsAny(host, " \t/") {
				err = fmt.Errorf("--host %q: want an IP address or host name to listen on", host)
			}
			cfg.Server.Host = host
		case "port":
			if port < 1 || port > 65535 {
				err = fmt.Errorf("--port %d: want 1-65535", port)
			}
			cfg.Server.Port = port
		}
	})
	return err
}

// serve builds the store, the runtime and the API from cfg and serves
// until ctx ends.
func serve(ctx context.Context, cfg serverconfig.Config, logger *slog.Logger) error {
	if cfg.Server.APIKey == "" {
		logger.Warn("running without an API key: anyone who reaches the server controls its sandboxes")
	}
	if cfg.Runtime.Type == serverconfig.RuntimeKubernetes {
		// The kubernetes driver is wired in by the next commits.
		return fmt.Errorf("runtime.type = %q: this build of the server cannot run it yet", cfg.Runtime.Type)
	}
	st, err := store.Open(store.Options{Path: cfg.Store.Path})
	if err != nil {
		return err
	}
	defer st.Close()

	instance, err := instanceID(ctx, cfg, st)
	if err != nil {
		return err
	}
	rt, closeRuntime, err := newDockerRuntime(ctx, cfg, instance, logger)
	if err != nil {
		return err
	}
	defer closeRuntime()

	diskLimit, err := defaultDiskLimit(ctx, cfg.Storage.DefaultDiskLimit, rt, logger)
	if err != nil {
		return err
	}

	spec, err := openAPIJSON(api.LifecycleYAML)
	if err != nil {
		return err
	}
	srv, err := server.New(server.Config{
		Runtime:          rt,
		Store:            serverStore{st},
		APIKey:           cfg.Server.APIKey,
		OpenProxy:        !cfg.Server.ProxyRequiresAPIKey,
		PublicHost:       cfg.Server.EIP,
		MaxTimeout:       cfg.Server.MaxSandboxTimeout(),
		MinTimeout:       cfg.Server.MinSandboxTimeout(),
		DefaultDiskLimit: diskLimit,
		OpenAPIJSON:      spec,
		Logger:           logger,
	})
	if err != nil {
		return err
	}

	if cfg.Debug.Enabled {
		stopDebug, err := startDebug(cfg.Debug.Address, srv.Metrics().Handler(), logger)
		if err != nil {
			return err
		}
		defer stopDebug()
	}

	ln, err := net.Listen("tcp", cfg.Server.Addr())
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	hs := server.NewHTTPServer(srv.Handler(), ln.Addr().String())
	logger.Info("opensandbox-server listening", "addr", cfg.Server.Addr(),
		"config", cfg.Path, "store", st.Path(), "auth", cfg.Server.APIKey != "")
	return runUntilDone(ctx, srv, hs, ln, logger)
}

// defaultDiskLimit parses storage.default_disk_limit ("" = none) and,
// when one is set, asks the runtime whether it can enforce it: creates
// that rely on the default fail when it cannot, so the operator is told
// now. An engine that cannot be asked only gets a note; creates ask again.
func defaultDiskLimit(ctx context.Context, v string, rt runtime.Runtime, logger *slog.Logger) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := grammar.ParseMemory(v)
	if err != nil || n < docker.MinDiskBytes {
		return 0, fmt.Errorf("storage.default_disk_limit = %q: want a size of at least 16Mi such as \"10Gi\"", v)
	}
	dc, ok := rt.(runtime.DiskLimitChecker)
	if !ok {
		logger.Warn("storage.default_disk_limit is set but the runtime cannot say whether it enforces disk limits", "default_disk_limit", v)
		return n, nil
	}
	switch err := dc.CheckDiskLimit(ctx); {
	case errors.Is(err, runtime.ErrDiskLimitUnsupported):
		logger.Warn("storage.default_disk_limit is set but the engine cannot enforce disk limits: every create without its own resourceLimits.ephemeral-storage will fail with 400 DISK_LIMIT_NOT_SUPPORTED; see docs/server.md#disk-limits",
			"default_disk_limit", v, "err", err)
	case err != nil:
		logger.Warn("could not ask the engine whether it enforces disk limits; creates will ask again", "default_disk_limit", v, "err", err)
	default:
		logger.Info("sandbox disk limit", "default_disk_limit", v)
	}
	return n, nil
}

// runUntilDone runs the server's background work and the HTTP server
// until ctx ends or one of them fails, then shuts both down within
// shutdownTimeout: HTTP first (in-flight requests finish), then the
// background work.
func runUntilDone(ctx context.Context, srv *server.Server, hs *http.Server, ln net.Listener, logger *slog.Logger) error {
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRun()
	runDone := make(chan error, 1)
	go func() { runDone <- srv.Run(runCtx) }()
	serveDone := make(chan error, 1)
	go func() { serveDone <- hs.Serve(ln) }()

	var err error
	select {
	case <-ctx.Done():
		logger.Info("shutting down", "timeout", shutdownTimeout)
	case err = <-serveDone:
		serveDone = nil
		err = fmt.Errorf("http server: %w", err)
	case err = <-runDone:
		runDone = nil
		err = fmt.Errorf("server stopped: %w", errOrStopped(err))
	}

	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if e := hs.Shutdown(shutdownCtx); e != nil {
		logger.Warn("graceful HTTP shutdown incomplete; closing connections", "err", e)
		hs.Close()
	}
	if serveDone != nil {
		if e := <-serveDone; !errors.Is(e, http.ErrServerClosed) && err == nil {
			err = fmt.Errorf("http server: %w", e)
		}
	}
	stopRun()
	if runDone != nil {
		select {
		case e := <-runDone:
			if e != nil && !errors.Is(e, context.Canceled) && err == nil {
				err = fmt.Errorf("server background work: %w", e)
			}
		case <-shutdownCtx.Done():
			logger.Warn("background work did not stop within the shutdown timeout")
		}
	}
	return err
}

func errOrStopped(err error) error {
	if err == nil {
		return errors.New("background work ended unexpectedly")
	}
	return err
}

// newLogger builds the program's logger from the [log] table.
func newLogger(c serverconfig.Log) (*slog.Logger, func(), error) {
	var out io.Writer = os.Stderr
	closeFn := func() {}
	if c.FilePath != "" {
		if err := os.MkdirAll(filepath.Dir(c.FilePath), 0o700); err != nil {
			return nil, nil, fmt.Errorf("log file: %w", err)
		}
		f, err := os.OpenFile(c.FilePath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, nil, fmt.Errorf("log file: %w", err)
		}
		out, closeFn = f, func() { f.Close() }
	}
	// Records logged with a request's context (the runtime's, while it
	// serves a create) carry the request's id.
	h := httpmw.ContextHandler(slog.NewTextHandler(out, &slog.HandlerOptions{Level: c.SlogLevel()}))
	return slog.New(h), closeFn, nil
}
