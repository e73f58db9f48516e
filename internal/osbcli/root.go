package osbcli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// version is osb's version, printed by --version.
const version = "0.1.0"

// app is the state of one osb invocation.
type app struct {
	io   stdio
	env  func(string) (string, bool)
	home string

	// Global flag values; which ones were given is read from the flag set.
	apiKey, domain, protocol, requestTimeout, configFile string
	useServerProxy, verbose, noColor                     bool

	started  bool // a command's PersistentPreRunE ran (later errors are not usage errors)
	settings settings
	client   *sandbox.Client
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "osb",
		Short: "Manage OpenSandbox sandboxes from the command line",
		Long: `osb creates and manages sandboxes on an OpenSandbox server, runs commands in
them, moves files in and out and opens interactive terminals.

Connection settings come from flags, then OPEN_SANDBOX_* environment
variables, then ~/.opensandbox/config.toml, then built-in defaults.`,
		Version:           version,
		SilenceErrors:     true,
		SilenceUsage:      true,
		PersistentPreRunE: a.setup,
	}
	f := root.PersistentFlags()
	f.StringVar(&a.apiKey, "api-key", "", "API key (env OPEN_SANDBOX_API_KEY)")
	f.StringVar(&a.domain, "domain", "", "server address host[:port] (env OPEN_SANDBOX_DOMAIN; default localhost:8080)")
	f.StringVar(&a.protocol, "protocol", "", "http or https (env OPEN_SANDBOX_PROTOCOL)")
	f.StringVar(&a.requestTimeout, "request-timeout", "", "timeout of non-streaming requests in seconds, 0 = none (env OPEN_SANDBOX_REQUEST_TIMEOUT; default 30)")
	f.BoolVar(&a.useServerProxy, "use-server-proxy", false, "reach sandboxes through the server's proxy (env OPEN_SANDBOX_USE_SERVER_PROXY)")
	f.StringVar(&a.configFile, "config", "", "config file (default ~/.opensandbox/config.toml)")
	f.BoolVarP(&a.verbose, "verbose", "v", false, "log every HTTP request to stderr")
	f.BoolVar(&a.noColor, "no-color", false, "no colour in output")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })

	root.AddCommand(
		a.sandboxCommand(),
		a.commandCommand(),
		a.execCommand(),
		a.codeCommand(),
		a.fileCommand(),
		a.shellCommand(),
		a.diagnosticsCommand(),
		a.devopsCommand(),
		a.egressCommand(),
		a.credentialVaultCommand(),
		a.configCommand(),
	)
	groupsRejectUnknown(root)
	addOutputFlags(root)
	return root
}

// groupsRejectUnknown makes a command group given an unknown subcommand
// fail as a usage error (cobra would print the help and succeed); alone,
// a group prints its help.
func groupsRejectUnknown(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		groupsRejectUnknown(c)
	}
	if !cmd.HasSubCommands() || cmd.Runnable() || !cmd.HasParent() {
		return
	}
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usagef("unknown command %q for %q", args[0], c.CommandPath())
		}
		return c.Help()
	}
}

// setup resolves the configuration before any command runs.
func (a *app) setup(cmd *cobra.Command, _ []string) error {
	a.started = true
	flags := map[string]string{}
	for _, name := range []string{"api-key", "domain", "protocol", "request-timeout", "use-server-proxy", "no-color"} {
		if fl := cmd.Flags().Lookup(name); fl != nil && fl.Changed {
			flags[name] = fl.Value.String()
		}
	}
	path, explicit := a.configPath(), a.configFile != ""
	file, err := readConfigFile(path, explicit)
	if err != nil {
		if cmd.Annotations["config"] == "lenient" || isCompletion(cmd) {
			// config init/set must work on a broken file; they report it.
			file = map[string]string{}
		} else {
			return withHint(err, "fix the file, or see: osb config show --help")
		}
	}
	s, err := resolve(configInputs{flags: flags, env: a.env, file: file, path: path})
	if err != nil {
		return withHint(fmt.Errorf("configuration: %w", err), "see: osb config show")
	}
	a.settings = s
	return nil
}

// isCompletion reports whether cmd generates or serves shell completion,
// which must work whatever the config file holds.
func isCompletion(cmd *cobra.Command) bool {
	for c := cmd; c != nil; c = c.Parent() {
		if c.Name() == "completion" || c.Name() == cobra.ShellCompRequestCmd || c.Name() == cobra.ShellCompNoDescRequestCmd {
			return true
		}
	}
	return false
}

// configPath is the config file in use.
func (a *app) configPath() string {
	if a.configFile != "" {
		return a.configFile
	}
	if p, ok := a.env("OPEN_SANDBOX_CONFIG"); ok && p != "" {
		return p
	}
	return defaultConfigPath(a.home)
}

// sdk returns the SDK client built from the resolved settings.
func (a *app) sdk() (*sandbox.Client, error) {
	if a.client != nil {
		return a.client, nil
	}
	opts := []sandbox.Option{
		sandbox.WithDomain(a.settings.Domain),
		sandbox.WithProtocol(a.settings.Protocol),
		sandbox.WithServerProxy(a.settings.UseServerProxy),
		sandbox.WithRequestTimeout(a.settings.RequestTimeout),
		sandbox.WithUserAgent("osb/" + version),
		sandbox.WithHTTPClient(a.httpClient()),
	}
	if a.settings.APIKey != "" {
		opts = append(opts, sandbox.WithAPIKey(a.settings.APIKey))
	}
	c, err := sandbox.NewClient(opts...)
	if err != nil {
		return nil, usageError{fmt.Errorf("connection settings: %w", err)}
	}
	a.client = c
	return c, nil
}

// httpClient is the client every request goes through; with -v it logs
// each request and its outcome to stderr.
func (a *app) httpClient() *http.Client {
	var rt http.RoundTripper = http.DefaultTransport
	if a.verbose {
		rt = &logTransport{next: rt, a: a}
	}
	return &http.Client{Transport: rt}
}

type logTransport struct {
	next http.RoundTripper
	a    *app
}

func (t *logTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	start := time.Now()
	fmt.Fprintf(t.a.io.err, "> %s %s\n", r.Method, r.URL.Redacted())
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		fmt.Fprintf(t.a.io.err, "< %s %s: %v (%s)\n", r.Method, r.URL.Path, err, time.Since(start).Round(time.Millisecond))
		return nil, err
	}
	fmt.Fprintf(t.a.io.err, "< %s %s: %s request-id=%s (%s)\n", r.Method, r.URL.Path, resp.Status, resp.Header.Get(sandbox.RequestIDHeader), time.Since(start).Round(time.Millisecond))
	return resp, nil
}

// connect returns a handle on a running sandbox's execd.
func (a *app) connect(ctx context.Context, id string) (*sandbox.Sandbox, error) {
	c, err := a.sdk()
	if err != nil {
		return nil, err
	}
	sb, err := c.Connect(ctx, id, sandbox.ConnectOptions{ReadyTimeout: 10 * time.Second})
	if errors.Is(err, sandbox.ErrNotReady) {
		if info, gerr := c.Get(ctx, id); gerr == nil && (info.Status.State == sandbox.StatePaused || info.Status.State == sandbox.StatePausing) {
			return nil, withHint(err, "resume it with: osb sandbox resume "+id)
		}
	}
	if err != nil {
		return nil, err
	}
	return sb, nil
}

// stdoutIsTerminal reports whether standard output is a terminal.
func (a *app) stdoutIsTerminal() bool {
	f, ok := a.io.out.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func (a *app) stderrIsTerminal() bool {
	f, ok := a.io.err.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// colorOn reports whether tables may use colour.
func (a *app) colorOn() bool { return a.settings.Color && a.stdoutIsTerminal() }

// exactArgs is cobra.ExactArgs whose failure is a usage error naming the
// arguments wanted.
func exactArgs(n int, names string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("want %d argument(s): %s; got %d", n, names, len(args))
		}
		return nil
	}
}

func minArgs(n int, names string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) < n {
			return usagef("want at least %d argument(s): %s; got %d", n, names, len(args))
		}
		return nil
	}
}

// octalMode reads a permission like "755" or "0644" into the SDK's
// "octal digits as a decimal number" form.
func octalMode(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseUint(s, 8, 32)
	if err != nil || v > 0o7777 {
		return 0, usagef("mode %q: want octal digits such as 644 or 0755", s)
	}
	d, _ := strconv.Atoi(strconv.FormatUint(v, 8))
	return d, nil
}
