// Command task-executor runs the tasks of a BatchSandbox's replica: the
// controller injects it into each pod as a sidecar container and sets the
// replica's task through its HTTP API (internal/taskexecutor).
//
// Environment: LISTEN_ADDR (default :5758), DATA_DIR (default
// /var/lib/task-executor), ENABLE_SIDECAR_MODE (true: run tasks in the
// sandbox container, found through the pod's shared process namespace),
// MAIN_CONTAINER_NAME (the sandbox container's name), STOP_GRACE (Go
// duration between SIGTERM and SIGKILL when a task is stopped, default 10s).
//
// `task-executor shim DIR` is the per-task shim the executor starts.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/taskexecutor"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "shim" {
		os.Exit(taskexecutor.RunShim(os.Args[2:]))
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if err := run(logger); err != nil {
		logger.Error("task-executor failed", "error", err.Error())
		os.Exit(1)
	}
}

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func run(logger *slog.Logger) error {
	addr := env("LISTEN_ADDR", ":"+strconv.Itoa(taskexecutor.DefaultPort))
	sidecar, err := strconv.ParseBool(env("ENABLE_SIDECAR_MODE", "false"))
	if err != nil {
		return fmt.Errorf("ENABLE_SIDECAR_MODE: %w", err)
	}
	grace, err := time.ParseDuration(env("STOP_GRACE", "10s"))
	if err != nil {
		return fmt.Errorf("STOP_GRACE: %w", err)
	}
	cfg := taskexecutor.Config{
		DataDir:           env("DATA_DIR", "/var/lib/task-executor"),
		SidecarMode:       sidecar,
		MainContainerName: os.Getenv("MAIN_CONTAINER_NAME"),
		StopGrace:         grace,
		Logger:            logger,
	}
	ex, err := taskexecutor.Open(cfg)
	if err != nil {
		return err
	}
	defer ex.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: taskexecutor.Handler(ex, logger), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	logger.Info("task-executor listening", "addr", ln.Addr().String(), "dataDir", cfg.DataDir, "sidecarMode", sidecar)
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving: %w", err)
	}
	return nil
}
