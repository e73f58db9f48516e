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
	"strings"

	"github.com/opensandbox-go/opensandbox/internal/serverconfig"
)

// initConfig is the init-config subcommand: it writes an example config
// file with a freshly generated API key. Flags may come before or after
// the path, as in upstream's `init-config ~/.sandbox.toml --example docker`.
func initConfig(args []string, env func(string) string, stdout io.Writer) (int, error) {
	set := flag.NewFlagSet("opensandbox-server init-config", flag.ContinueOnError)
	example := set.String("example", serverconfig.ExampleDocker, "example to write: docker or k8s")
	force := set.Bool("force", false, "overwrite an existing file")
	set.Usage = func() {
		fmt.Fprintln(set.Output(), "usage: opensandbox-server init-config [path] [--example docker|k8s] [--force]")
		fmt.Fprintln(set.Output(), "path defaults to $"+serverconfig.EnvConfigPath+", else ~/"+serverconfig.DefaultConfigFile+"; flags may come before or after it")
		set.PrintDefaults()
	}
	positional, err := parseInterspersed(set, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, nil
		}
		return 2, err
	}
	if len(positional) > 1 {
		return 2, fmt.Errorf("init-config: unexpected argument %q (want at most one path)", positional[1])
	}
	var arg string
	if len(positional) == 1 {
		arg = positional[0]
	}
	path, err := serverconfig.ConfigPath(arg, env)
	if err != nil {
		return 1, fmt.Errorf("init-config: %w", err)
	}

	key := rand.Text()
	text, err := serverconfig.ExampleWithAPIKey(*example, key)
	if err != nil {
		return 2, fmt.Errorf("init-config: %w", err)
	}
	if err := writeConfigFile(path, text, *force); err != nil {
		return 1, err
	}
	start := "opensandbox-server"
	if def, err := serverconfig.ConfigPath("", env); err != nil || def != path {
		start += " --config " + shellQuote(path)
	}
	fmt.Fprintf(stdout, "wrote %s (%s example)\n", path, *example)
	fmt.Fprintf(stdout, "API key: a new one is api_key in the [server] table of %s (file mode 0600; %s overrides it)\n", path, serverconfig.EnvAPIKey)
	fmt.Fprintln(stdout, "clients send it in the OPEN-SANDBOX-API-KEY header; osb and the SDKs read OPEN_SANDBOX_API_KEY:")
	fmt.Fprintf(stdout, "  export OPEN_SANDBOX_API_KEY=\"$(%s)\"\n", keyCommand(path))
	fmt.Fprintf(stdout, "start the server with: %s\n", start)
	return 0, nil
}

// parseInterspersed parses flags wherever they stand among the
// positional arguments (the flag package stops at the first positional
// one) and returns the positional arguments in order; everything after
// "--" is positional.
func parseInterspersed(set *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := set.Parse(args); err != nil {
			return nil, err
		}
		rest := set.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(positional, rest...), nil
		}
		if len(rest) == 0 {
			return positional, nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// keyCommand is a shell command printing the api_key that
// ExampleWithAPIKey wrote into the file at path.
func keyCommand(path string) string {
	return `sed -n 's/^api_key = "\(.*\)"$/\1/p' ` + shellQuote(path)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
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
