// Command helmcheck runs Helm's lint, template, install and uninstall
// actions as a library (helm.sh/helm/v4), so that the chart in
// deploy/helm/opensandbox is checked and installed without a helm CLI.
//
//	helmcheck lint [-f values.yaml] [--set k=v] CHART
//	helmcheck template [--name R] [--namespace NS] [-f ...] [--set ...] CHART
//	helmcheck install --kubeconfig K --namespace NS --name R [--timeout 5m] [--wait=false] [-f ...] [--set ...] CHART
//	helmcheck uninstall --kubeconfig K --namespace NS --name R [--timeout 5m]
//
// It is a module of its own (tools/helmcheck/go.mod): Helm v4 needs the
// k8s.io modules at v0.37, while the main module stays on v0.35, which
// controller-runtime v0.23 and the containerd client pin. The tests of the
// main module run it and decode its output with their own scheme.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/loader"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/cli"
	"helm.sh/helm/v4/pkg/cli/values"
	"helm.sh/helm/v4/pkg/getter"
	"helm.sh/helm/v4/pkg/kube"
	release "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "helmcheck:", err)
		os.Exit(1)
	}
}

// multi is a repeatable string flag.
type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

type options struct {
	kubeconfig, namespace, name string
	timeout                     time.Duration
	wait                        bool
	files, sets                 multi
}

func run(args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: helmcheck lint|template|install|uninstall [flags] [CHART]")
	}
	cmd := args[0]
	fs := flag.NewFlagSet("helmcheck "+cmd, flag.ContinueOnError)
	var o options
	fs.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster (install, uninstall)")
	fs.StringVar(&o.namespace, "namespace", "default", "release namespace")
	fs.StringVar(&o.name, "name", "opensandbox", "release name")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "how long install and uninstall may wait for the release's resources")
	fs.BoolVar(&o.wait, "wait", true, "install: wait until the release's resources are ready")
	fs.Var(&o.files, "f", "values file (repeatable)")
	fs.Var(&o.sets, "set", "value key=val (repeatable)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	chartArg := func() (string, error) {
		if fs.NArg() != 1 {
			return "", fmt.Errorf("%s needs one chart directory", cmd)
		}
		return fs.Arg(0), nil
	}
	vals := func() (map[string]any, error) {
		opts := &values.Options{ValueFiles: o.files, Values: o.sets}
		v, err := opts.MergeValues(getter.All(cli.New()))
		if err != nil {
			return nil, fmt.Errorf("values: %w", err)
		}
		return v, nil
	}
	switch cmd {
	case "lint":
		chart, err := chartArg()
		if err != nil {
			return err
		}
		v, err := vals()
		if err != nil {
			return err
		}
		return lint(chart, o.namespace, v, out)
	case "template":
		chart, err := chartArg()
		if err != nil {
			return err
		}
		v, err := vals()
		if err != nil {
			return err
		}
		return template(chart, o, v, out)
	case "install":
		chart, err := chartArg()
		if err != nil {
			return err
		}
		v, err := vals()
		if err != nil {
			return err
		}
		return install(chart, o, v, out)
	case "uninstall":
		if fs.NArg() != 0 {
			return errors.New("uninstall takes no chart")
		}
		return uninstall(o, out)
	}
	return fmt.Errorf("unknown command %q: want lint, template, install or uninstall", cmd)
}

// lint is `helm lint --strict`: a warning fails as an error does;
// informational messages are printed.
func lint(chart, namespace string, vals map[string]any, out io.Writer) error {
	l := action.NewLint()
	l.Strict = true
	l.Namespace = namespace
	res := l.Run([]string{chart}, vals)
	failed := len(res.Errors)
	for _, m := range res.Messages {
		fmt.Fprintln(out, m.Error())
		if m.Severity >= support.WarningSev {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("lint --strict %s: %d warnings or errors", chart, failed)
	}
	fmt.Fprintf(out, "lint --strict %s: %d chart(s) linted, no warning\n", chart, res.TotalChartsLinted)
	return nil
}

// template is `helm template --include-crds`: the CRDs, the manifests and
// the hooks, as one YAML stream, rendered without a cluster.
func template(chart string, o options, vals map[string]any, out io.Writer) error {
	ch, err := loader.Load(chart)
	if err != nil {
		return fmt.Errorf("load %s: %w", chart, err)
	}
	in := action.NewInstall(action.NewConfiguration())
	in.DryRunStrategy = action.DryRunClient
	in.ReleaseName = o.name
	in.Namespace = o.namespace
	in.Replace = true
	in.IncludeCRDs = true
	rel, err := in.Run(ch, vals)
	if err != nil {
		return fmt.Errorf("render %s: %w", chart, err)
	}
	r, err := v1(rel)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, strings.TrimSpace(r.Manifest))
	for _, h := range r.Hooks {
		fmt.Fprintf(out, "---\n# Source: %s\n%s\n", h.Path, h.Manifest)
	}
	return nil
}

func config(o options) (*action.Configuration, error) {
	if o.kubeconfig == "" {
		return nil, errors.New("--kubeconfig (or KUBECONFIG) is required")
	}
	flags := genericclioptions.NewConfigFlags(true)
	flags.KubeConfig = &o.kubeconfig
	flags.Namespace = &o.namespace
	cfg := action.NewConfiguration()
	cfg.SetLogger(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := cfg.Init(flags, o.namespace, "secret"); err != nil {
		return nil, fmt.Errorf("helm configuration: %w", err)
	}
	return cfg, nil
}

// install is `helm install --wait`: it returns when every Deployment of
// the release is available, or fails at the timeout; with --wait=false it
// returns once the objects are created (the caller watches them).
func install(chart string, o options, vals map[string]any, out io.Writer) error {
	cfg, err := config(o)
	if err != nil {
		return err
	}
	ch, err := loader.Load(chart)
	if err != nil {
		return fmt.Errorf("load %s: %w", chart, err)
	}
	in := action.NewInstall(cfg)
	in.ReleaseName = o.name
	in.Namespace = o.namespace
	in.Timeout = o.timeout
	in.WaitStrategy = kube.StatusWatcherStrategy
	if !o.wait {
		in.WaitStrategy = kube.HookOnlyStrategy
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout+time.Minute)
	defer cancel()
	rel, err := in.RunWithContext(ctx, ch, vals)
	if err != nil {
		return fmt.Errorf("install %s as %s in %s: %w", chart, o.name, o.namespace, err)
	}
	r, err := v1(rel)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "installed %s revision %d: %s\n", r.Name, r.Version, r.Info.Status)
	return nil
}

// uninstall is `helm uninstall --wait`.
func uninstall(o options, out io.Writer) error {
	cfg, err := config(o)
	if err != nil {
		return err
	}
	u := action.NewUninstall(cfg)
	u.Timeout = o.timeout
	u.WaitStrategy = kube.StatusWatcherStrategy
	res, err := u.Run(o.name)
	if err != nil {
		return fmt.Errorf("uninstall %s in %s: %w", o.name, o.namespace, err)
	}
	if res != nil && res.Info != "" {
		fmt.Fprintln(out, res.Info)
	}
	fmt.Fprintf(out, "uninstalled %s\n", o.name)
	return nil
}

func v1(rel any) (*release.Release, error) {
	switch r := rel.(type) {
	case *release.Release:
		return r, nil
	case release.Release:
		return &r, nil
	}
	return nil, fmt.Errorf("unexpected release type %T", rel)
}
