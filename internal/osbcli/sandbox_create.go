package osbcli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func (a *app) sandboxCreateCommand() *cobra.Command {
	var (
		image, authUser, authPass, timeout, networkFile, volumesFile, readyTimeout string
		env, metadata, extensions, resources, entrypoint                           []string
		skipHealth, credProxy                                                      bool
	)
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a sandbox and wait until it is ready",
		Example: `  osb sandbox create -i opensandbox/base:latest -t 30m -e DEBUG=1 -m team=ai
  osb sandbox create -i python:3.12 --entrypoint python3 --entrypoint -m --entrypoint http.server -o json`,
		Args: exactArgs(0, "none"),
	}
	f := cmd.Flags()
	f.StringVarP(&image, "image", "i", "", "container image (default: defaults.image in the config)")
	f.StringVar(&authUser, "image-auth-username", "", "registry user name for a private image")
	f.StringVar(&authPass, "image-auth-password", "", "registry password for a private image")
	f.StringVarP(&timeout, "timeout", "t", "", `time until the sandbox expires (30m, 2h) or "none" (default: defaults.timeout, 10m)`)
	f.StringArrayVarP(&env, "env", "e", nil, "environment variable KEY=VALUE (repeatable)")
	f.StringArrayVarP(&metadata, "metadata", "m", nil, "metadata label KEY=VALUE (repeatable)")
	f.StringArrayVar(&extensions, "extension", nil, "runtime extension KEY=VALUE (repeatable)")
	f.StringArrayVar(&resources, "resource", nil, "resource limit KEY=VALUE: cpu, memory, ephemeral-storage (disk), gpu (repeatable; default cpu=1,memory=2Gi)")
	f.StringArrayVar(&entrypoint, "entrypoint", nil, "entrypoint argv item (repeatable; default tail -f /dev/null)")
	f.StringVar(&networkFile, "network-policy-file", "", "JSON or YAML network policy file")
	f.BoolVar(&credProxy, "credential-proxy", false, "enable the credential proxy (needs --network-policy-file); fill it with osb credential-vault create")
	f.StringVar(&volumesFile, "volumes-file", "", "JSON or YAML file with a list of volumes")
	f.BoolVar(&skipHealth, "skip-health-check", false, "return once the sandbox runs, without waiting for execd")
	f.StringVar(&readyTimeout, "ready-timeout", "30", "how long to wait for the sandbox to be ready, seconds or a duration")

	return a.result(cmd, formatTable, func(cmd *cobra.Command, _ []string) (view, error) {
		ctx := cmd.Context()
		if credProxy && networkFile == "" {
			return view{}, usagef("--credential-proxy needs --network-policy-file: the proxy runs in the egress sidecar")
		}
		opts := sandbox.CreateOptions{Image: image, Entrypoint: entrypoint, SkipHealthCheck: skipHealth, CredentialProxy: credProxy}
		if opts.Image == "" {
			opts.Image = a.settings.DefaultImage
		}
		if opts.Image == "" {
			return view{}, withHint(usagef("no image: give --image"), "or set a default: osb config set defaults.image <image>")
		}
		if authUser != "" || authPass != "" {
			opts.ImageAuth = &sandbox.ImageAuth{Username: authUser, Password: authPass}
		}
		if timeout == "" {
			timeout = a.settings.DefaultTimeout
		}
		d, none, err := parseSandboxTimeout(timeout)
		if err != nil {
			return view{}, usagef("--timeout: %v", err)
		}
		opts.Timeout, opts.ManualCleanup = d, none
		if opts.ReadyTimeout, err = parseDurationFlag("ready-timeout", readyTimeout); err != nil {
			return view{}, err
		}
		if opts.Env, err = parsePairs("env", env); err != nil {
			return view{}, err
		}
		if opts.Metadata, err = parsePairs("metadata", metadata); err != nil {
			return view{}, err
		}
		if opts.Extensions, err = parsePairs("extension", extensions); err != nil {
			return view{}, err
		}
		if opts.Resources, err = parsePairs("resource", resources); err != nil {
			return view{}, err
		}
		if networkFile != "" {
			opts.NetworkPolicy = new(sandbox.NetworkPolicy)
			if err := a.readStructured(networkFile, opts.NetworkPolicy); err != nil {
				return view{}, err
			}
		}
		if volumesFile != "" {
			if err := a.readStructured(volumesFile, &opts.Volumes); err != nil {
				return view{}, err
			}
		}
		c, err := a.sdk()
		if err != nil {
			return view{}, err
		}
		sp := a.spin("creating sandbox from " + opts.Image)
		sb, err := c.Create(ctx, opts)
		sp.Stop()
		if err != nil {
			return view{}, err
		}
		info, err := sb.Info(ctx)
		if err != nil {
			return view{}, fmt.Errorf("sandbox %s created, but reading it failed: %w", sb.ID(), err)
		}
		return a.sandboxView(info), nil
	})
}

// readStructured decodes a JSON or YAML file ("-" is stdin) into v, by
// way of JSON so the wire field names apply to both.
func (a *app) readStructured(path string, v any) error {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(a.io.in)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if json.Valid(b) {
		if err := json.Unmarshal(b, v); err != nil {
			return fmt.Errorf("parse %s: %w", path, err)
		}
		return nil
	}
	var y any
	if err := yaml.Unmarshal(b, &y); err != nil {
		return fmt.Errorf("parse %s: neither JSON nor YAML: %w", path, err)
	}
	j, err := json.Marshal(y)
	if err != nil {
		return fmt.Errorf("parse %s: %w", path, err)
	}
	if err := json.Unmarshal(j, v); err != nil {
		return fmt.Errorf("parse %s: %w", path, err)
	}
	return nil
}
