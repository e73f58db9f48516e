package osbcli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

func (a *app) configCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Create, show and change the osb config file",
		Long: `osb reads ~/.opensandbox/config.toml (or --config, or OPEN_SANDBOX_CONFIG).
Precedence: flags > OPEN_SANDBOX_* environment > config file > defaults.

Keys: ` + strings.Join(keyNames(), ", "),
	}
	cmd.AddCommand(a.configInitCommand(), a.configShowCommand(), a.configSetCommand())
	return cmd
}

func (a *app) configInitCommand() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:         "init",
		Short:       "Write a commented config file with the defaults",
		Example:     `  osb config init && osb config set connection.api_key "$KEY"`,
		Args:        exactArgs(0, "none"),
		Annotations: map[string]string{"config": "lenient"},
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "overwrite an existing file")
	return a.result(cmd, formatTable, func(*cobra.Command, []string) (view, error) {
		path := a.configPath()
		if _, err := os.Stat(path); err == nil && !force {
			return view{}, withHint(fmt.Errorf("config init: %s already exists", path), "overwrite it with: osb config init --force")
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return view{}, fmt.Errorf("config init: %w", err)
		}
		if err := writeConfigBytes(path, []byte(configTemplate)); err != nil {
			return view{}, fmt.Errorf("config init: %w", err)
		}
		return actionView(map[string]string{"path": path, "status": "created"}, path), nil
	})
}

func (a *app) configShowCommand() *cobra.Command {
	var showSecrets bool
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Show the effective settings and where each comes from",
		Example: `  osb config show
  OPEN_SANDBOX_DOMAIN=sandbox.internal:8080 osb config show -o json`,
		Args: exactArgs(0, "none"),
	}
	cmd.Flags().BoolVar(&showSecrets, "show-secrets", false, "print the API key instead of a masked form")
	return a.result(cmd, formatTable, func(*cobra.Command, []string) (view, error) {
		s := a.settings
		type entry struct {
			Key    string `json:"key"`
			Value  string `json:"value"`
			Source string `json:"source"`
		}
		entries := make([]entry, 0, len(configKeys))
		for _, k := range configKeys {
			v := s.values[k.name]
			if k.name == "connection.api_key" && !showSecrets {
				v = maskSecret(v)
			}
			entries = append(entries, entry{Key: k.name, Value: v, Source: s.sources[k.name]})
		}
		data := map[string]any{"path": s.path, "settings": entries}
		return view{data: data, table: func(t *tableWriter) {
			t.row("KEY", "VALUE", "SOURCE")
			for _, e := range entries {
				t.row(e.Key, dash(e.Value), e.Source)
			}
			t.row("")
			t.row("config file: " + s.path)
		}}, nil
	})
}

// maskSecret keeps the last four characters of a secret.
func maskSecret(s string) string {
	if s == "" {
		return ""
	}
	if len(s) <= 4 {
		return "****"
	}
	return "****" + s[len(s)-4:]
}

func (a *app) configSetCommand() *cobra.Command {
	return a.result(&cobra.Command{
		Use:   "set <key> <value>",
		Short: "Set one key in the config file (checked before it is written)",
		Long: "Sets one key in the config file, creating it (mode 0600) when needed.\n\nKeys:\n" + func() string {
			var b strings.Builder
			for _, k := range configKeys {
				fmt.Fprintf(&b, "  %-28s %s\n", k.name, k.about)
			}
			return b.String()
		}(),
		Example: `  osb config set connection.domain sandbox.internal:8080
  osb config set defaults.timeout none
  osb config set output.color false`,
		Args:        exactArgs(2, "<key> <value>"),
		Annotations: map[string]string{"config": "lenient"},
	}, formatTable, func(_ *cobra.Command, args []string) (view, error) {
		path := a.configPath()
		k, err := setConfigValue(path, args[0], args[1])
		if err != nil {
			return view{}, withHint(fmt.Errorf("config set: %w", err), "see the keys with: osb config set --help")
		}
		value := args[1]
		if k.name == "connection.api_key" {
			value = maskSecret(value)
		}
		data := map[string]string{"key": k.name, "value": value, "path": path}
		return view{data: data, table: func(t *tableWriter) {
			t.row(k.name + " set in " + path)
		}}, nil
	})
}
