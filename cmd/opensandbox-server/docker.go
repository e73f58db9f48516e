package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/docker/docker/client"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/internal/runtime/docker"
	"github.com/opensandbox-go/opensandbox/internal/serverconfig"
)

// newDockerRuntime turns the [runtime], [docker] and [secure_runtime]
// tables into the Docker driver. The returned func releases the engine
// client.
func newDockerRuntime(ctx context.Context, cfg serverconfig.Config, instance instance, logger *slog.Logger) (*docker.Runtime, func(), error) {
	execd, err := findExecd(cfg.Runtime.ExecdPath)
	if err != nil {
		return nil, nil, err
	}
	egress := cfg.Egress.EgressPath
	if egress == "" && cfg.Egress.Image == "" {
		egress = findBeside("egress") // optional: without it policies are refused
	}
	cli, err := newDockerClient(cfg.Docker.APITimeout())
	if err != nil {
		return nil, nil, fmt.Errorf("docker client: %w", err)
	}
	d := cfg.Docker
	noNewPrivileges := d.NoNewPrivileges
	isolate := d.IsolateSandboxes
	pids := d.PidsLimit
	if pids == 0 {
		pids = -1 // our 0 means no limit; the driver's 0 means its default
	}
	warm := d.WarmNetworks
	if warm == 0 {
		warm = -1 // our 0 means none; the driver's 0 means its default
	}
	startCtx, cancel := context.WithTimeout(ctx, cfg.Docker.APITimeout())
	defer cancel()
	rt, err := docker.New(startCtx, docker.Options{
		Client:               cli,
		ExecdPath:            execd,
		NetworkMode:          d.NetworkMode,
		IsolateSandboxes:     &isolate,
		BridgeNetwork:        d.BridgeNetwork,
		HostIP:               d.HostIP,
		PublishedPortRange:   d.PublishedPortRange,
		DropCapabilities:     append([]string{}, d.DropCapabilities...), // non-nil: [] drops nothing
		NoNewPrivileges:      &noNewPrivileges,
		SeccompProfile:       d.SeccompProfile,
		AppArmorProfile:      d.AppArmorProfile,
		PidsLimit:            pids,
		WarmNetworks:         warm,
		IsolatedExecution:    isolatedExecution(d.IsolatedExecution),
		Runtime:              cfg.SecureRuntime.DockerRuntime,
		ExecdCopy:            d.ExecdCopy,
		EgressImage:          cfg.Egress.Image,
		EgressPath:           egress,
		EgressMode:           cfg.Egress.Mode,
		EgressDisableIPv6:    cfg.Egress.DisableIPv6,
		EgressDNSUpstreams:   cfg.Egress.DNSUpstream,
		EgressUpstreamCAFile: cfg.Egress.UpstreamCAFile,
		EgressDenyWebhook:    cfg.Egress.DenyWebhook,
		EgressBlockDoH:       cfg.Egress.BlockDoH443,
		EgressDoHBlocklist:   cfg.Egress.DoHBlocklist,
		AllowedHostPaths:     cfg.Storage.AllowedHostPaths,
		InstanceID:           instance.id,
		EgressAllowMetadata:  cfg.Egress.AllowMetadata,
		AllowMetadata:        !d.BlockMetadata,
		Logger:               logger,
	})
	if err != nil {
		cli.Close()
		if errors.Is(err, runtime.ErrUnavailable) {
			return nil, nil, fmt.Errorf("cannot reach the Docker engine at %s: start dockerd (for example `systemctl start docker`) "+
				"or point DOCKER_HOST at a running engine: %w", cli.DaemonHost(), err)
		}
		return nil, nil, err
	}
	if err := scopeInstance(startCtx, rt, instance, logger); err != nil {
		cli.Close()
		return nil, nil, err
	}
	if egress == "" && cfg.Egress.Image == "" {
		logger.Warn("no egress binary found next to the server or in PATH: creates with networkPolicy will be refused")
	}
	if iso := isolatedExecution(d.IsolatedExecution); iso != docker.IsolationOff {
		logger.Warn("docker.isolated_execution is " + iso + ": such sandboxes start with CAP_SYS_ADMIN (execd drops it at once) and may create user namespaces; see docs/isolation.md")
	}
	warnWithoutLiveRestore(ctx, rt, logger, cfg.Docker.APITimeout())
	logger.Info("docker runtime ready", "engine", cli.DaemonHost(), "execd", execd, "egress", egress,
		"network_mode", d.NetworkMode, "oci_runtime", cfg.SecureRuntime.DockerRuntime)
	return rt, func() { cli.Close() }, nil
}

// isolatedExecution maps docker.isolated_execution onto the driver's values.
func isolatedExecution(v string) string {
	if v == "off" {
		return docker.IsolationOff
	}
	return v
}

// newDockerClient builds an engine client from the environment (DOCKER_HOST,
// DOCKER_CERT_PATH, DOCKER_TLS_VERIFY, DOCKER_API_VERSION) whose requests
// fail when the engine takes longer than apiTimeout to answer; streamed
// bodies (logs, pulls) may then run longer.
func newDockerClient(apiTimeout time.Duration) (*client.Client, error) {
	tr := &http.Transport{
		ResponseHeaderTimeout: apiTimeout,
		MaxIdleConns:          6,
		IdleConnTimeout:       30 * time.Second,
	}
	opts := []client.Opt{
		client.WithHTTPClient(&http.Client{Transport: tr, CheckRedirect: client.CheckRedirect}),
		client.WithHost(client.DefaultDockerHost),
	}
	certDir := os.Getenv(client.EnvOverrideCertPath)
	if certDir != "" {
		opts = append(opts, client.WithTLSClientConfig(
			filepath.Join(certDir, "ca.pem"), filepath.Join(certDir, "cert.pem"), filepath.Join(certDir, "key.pem")))
	}
	opts = append(opts, client.WithHostFromEnv(), client.WithVersionFromEnv(), client.WithAPIVersionNegotiation(), docker.CountEngineRequests())
	cli, err := client.NewClientWithOpts(opts...)
	if err != nil {
		return nil, err
	}
	if certDir != "" && os.Getenv(client.EnvTLSVerify) == "" {
		// As the docker CLI: certificates without DOCKER_TLS_VERIFY
		// authenticate the client but do not verify the engine.
		tr.TLSClientConfig.InsecureSkipVerify = true
	}
	return cli, nil
}

// findBeside returns the named binary next to this executable or in PATH,
// or "" when there is none.
func findBeside(name string) string {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			return abs
		}
	}
	return ""
}

// findExecd returns the execd binary to put into sandboxes: configured
// when set, else "execd" next to this executable, else the one in PATH.
func findExecd(configured string) (string, error) {
	if configured != "" {
		return filepath.Abs(configured)
	}
	if p := findBeside("execd"); p != "" {
		return p, nil
	}
	where := "this executable"
	if exe, err := os.Executable(); err == nil {
		where = filepath.Dir(exe)
	}
	return "", fmt.Errorf("execd binary not found in %s or in PATH: build it (make execd) and put it there, or set execd_path in the [runtime] table", where)
}
