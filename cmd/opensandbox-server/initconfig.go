package main

import (
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/opensandbox-go/opensandbox/internal/serverconfig"
)

// initConfig is the init-config subcommand: it writes an example config
// file with a freshly generated API key.
func initConfig(args []string, env func(string) string, stdout io.Writer) (int, error) {
	set := flag.NewFlagSet("opensandbox-server init-config", flag.ContinueOnError)
	example := set.String("example", serverconfig.ExampleDocker, "example to write: docker or k8s")
	force := set.Bool("force", false, "overwrite an existing file")
	set.Usage = func() {
		fmt.Fprintln(set.Output(), "usage: opensandbox-server init-config [--example docker|k8s] [--force] [path]")
		fmt.Fprintln(set.Output(), "path defaults to $"+serverconfig.EnvConfigPath+", else ~/"+serverconfig.DefaultConfigFile)
		set.PrintDefaults()
	}
	if err := set.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, nil
		}
		return 2, err
	}
	if set.NArg() > 1 {
		return 2, fmt.Errorf("init-config: unexpected argument %q", set.Arg(1))
	}
	path := set.Arg(0)
	if path == "" {
		path = env(serverconfig.EnvConfigPath)
	}
	if path == "" {
		home := env("HOME")
		if home == "" {
			h, err := os.UserHomeDir()
			if err != nil {
				return 1, fmt.Errorf("init-config: home directory: %w", err)
			}
			home = h
		}
		path = filepath.Join(home, serverconfig.DefaultConfigFile)
	}

	key := rand.Text()
	text, err := serverconfig.ExampleWithAPIKey(*example, key)
	if err != nil {
		return 2, fmt.Errorf("init-config: %w", err)
	}
	if err := writeConfigFile(path, text, *force); err != nil {
		return 1, err
	}
	fmt.Fprintf(stdout, "wrote %s (%s example)\n", path, *example)
	fmt.Fprintf(stdout, "a new API key is in api_key of its [server] table; clients send it in the OPEN-SANDBOX-API-KEY header (SDKs and osb read OPEN_SANDBOX_API_KEY)\n")
	return 0, nil
}

// writeConfigFile writes text to path with mode 0600 (it holds the API
// key), creating missing directories 0700; an existing file is only
// replaced with force.
func writeConfigFile(path, text string, force bool) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("init-config: %w", err)
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if !force {
		flags |= os.O_EXCL
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("init-config: %s already exists; use --force to overwrite it", path)
	}
	if err != nil {
		return fmt.Errorf("init-config: %w", err)
	}
	if _, err := io.WriteString(f, text); err != nil {
		f.Close()
		return fmt.Errorf("init-config: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("init-config: write %s: %w", path, err)
	}
	return nil
}
