// Command opensandbox-controller is the OpenSandbox operator: the
// controller-runtime manager running the reconcilers of the
// sandbox.opensandbox.io resources (internal/controller/...).
//
//	opensandbox-controller [--kubeconfig path] [--leader-elect=true]
//	    [--leader-election-namespace ns] [--metrics-bind-address :8080]
//	    [--health-probe-bind-address :8081] [--kube-client-qps 100]
//	    [--kube-client-burst 200] [--log-level info]
//
// It logs JSON lines through log/slog; see docs/kubernetes.md, "Controller".
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/opensandbox-go/opensandbox/internal/controller/batchsandbox"
	"github.com/opensandbox-go/opensandbox/internal/controller/pool"
	"github.com/opensandbox-go/opensandbox/internal/controller/snapshot"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

// LeaderElectionID names the Lease the replicas of the controller compete
// for.
const LeaderElectionID = "opensandbox-controller.sandbox.opensandbox.io"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	code, err := run(ctx, os.Args[1:], os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "opensandbox-controller:", err)
	}
	stop()
	os.Exit(code)
}

// options are the command-line settings.
type options struct {
	kubeconfig              string
	leaderElect             bool
	leaderElectionNamespace string
	leaderElectionID        string
	metricsAddr             string
	probeAddr               string
	qps                     float64
	burst                   int
	logLevel                slog.Level
	// watchNamespaces limits the controller to these namespaces (its
	// caches and reconcilers); empty means every namespace.
	watchNamespaces []string
	// taskExecutorImage is the image of the task-executor sidecar injected
	// into the pods of BatchSandboxes with a taskTemplate.
	taskExecutorImage string
	// snapshot configures SandboxSnapshots and pause/resume.
	snapshot         snapshot.Config
	resumePullSecret string
}

// serviceAccountNamespaceFile exists in a pod that runs with a service
// account; a variable so that tests can point it elsewhere.
var serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// inCluster reports whether the controller runs in a pod.
func inCluster() bool {
	_, err := os.Stat(serviceAccountNamespaceFile)
	return err == nil
}

// parseFlags reads args into options; flag.ErrHelp for -h.
func parseFlags(args []string, output io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("opensandbox-controller", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; default $KUBECONFIG, the in-cluster service account, then ~/.kube/config")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "elect a leader so that one replica of the controller acts at a time")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader-election Lease; default the controller's own namespace (in a cluster)")
	fs.StringVar(&o.leaderElectionID, "leader-election-id", LeaderElectionID, "name of the leader-election Lease")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus /metrics endpoint; 0 disables it")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	fs.Float64Var(&o.qps, "kube-client-qps", 100, "queries per second to the apiserver")
	fs.IntVar(&o.burst, "kube-client-burst", 200, "burst of queries to the apiserver")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.taskExecutorImage, "task-executor-image", batchsandbox.DefaultTaskExecutorImage, "image of the task-executor sidecar injected into pods of BatchSandboxes with a taskTemplate")
	watch := fs.String("watch-namespace", "", "comma-separated namespaces to act in (default: all); the Lease defaults to the controller's own namespace in a pod, else the first of them")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: opensandbox-controller [flags]")
		fs.PrintDefaults()
	}
	addSnapshotFlags(fs, &o)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if err := o.logLevel.UnmarshalText([]byte(*level)); err != nil {
		return o, fmt.Errorf("--log-level: %w", err)
	}
	if o.qps <= 0 {
		return o, fmt.Errorf("--kube-client-qps must be positive, got %v", o.qps)
	}
	if o.burst <= 0 {
		return o, fmt.Errorf("--kube-client-burst must be positive, got %d", o.burst)
	}
	if o.snapshot.CommitJobTimeout <= 0 {
		return o, fmt.Errorf("--commit-job-timeout must be positive, got %s", o.snapshot.CommitJobTimeout)
	}
	for _, ns := range strings.Split(*watch, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
				return o, fmt.Errorf("--watch-namespace: %q: %s", ns, strings.Join(errs, "; "))
			}
			o.watchNamespaces = append(o.watchNamespaces, ns)
		}
	}
	// In a pod the Lease lives in the controller's own namespace, where its
	// Role allows it (controller-runtime's default); outside a cluster
	// there is no own namespace, so the first watched one holds it.
	if o.leaderElectionNamespace == "" && len(o.watchNamespaces) > 0 && !inCluster() {
		o.leaderElectionNamespace = o.watchNamespaces[0]
	}
	return o, nil
}

// run is the whole program; it returns the exit code (2 for usage errors)
// and the error to print.
func run(ctx context.Context, args []string, stderr io.Writer) (int, error) {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0, nil
	}
	if err != nil {
		return 2, err
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: o.logLevel}))
	// controller-runtime logs through logr, client-go (leader election,
	// among others) through klog: both end up in the same JSON lines.
	lr := logr.FromSlogHandler(logger.Handler())
	ctrl.SetLogger(lr)
	klog.SetLoggerWithOptions(lr, klog.ContextualLogger(true))

	cfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return 1, err
	}
	mgr, err := newManager(cfg, o)
	if err != nil {
		return 1, err
	}
	logger.Info("starting", "leaderElect", o.leaderElect, "metrics", o.metricsAddr, "probes", o.probeAddr)
	if err := mgr.Start(ctx); err != nil {
		return 1, fmt.Errorf("running the manager: %w", err)
	}
	logger.Info("stopped")
	return 0, nil
}

// restConfig is the apiserver connection: the kubeconfig file if named,
// else controller-runtime's search ($KUBECONFIG, in-cluster, ~/.kube/config).
func restConfig(kubeconfig string) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = config.GetConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	return cfg, nil
}

// newScheme knows the built-in kinds and the OpenSandbox kinds.
func newScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := sandboxv1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// newManager builds the manager for cfg with the reconcilers, health checks
// and metrics set up; it does not start it.
func newManager(cfg *rest.Config, o options) (manager.Manager, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = float32(o.qps)
	cfg.Burst = o.burst
	cfg.UserAgent = "opensandbox-controller"
	scheme, err := newScheme()
	if err != nil {
		return nil, fmt.Errorf("building the scheme: %w", err)
	}
	// A leader that stops gives up its Lease at once rather than making
	// the next one wait out the lease duration; safe because the manager
	// stops every reconciler before the lease is released.
	var cacheOpts cache.Options
	if len(o.watchNamespaces) > 0 {
		cacheOpts.DefaultNamespaces = make(map[string]cache.Config, len(o.watchNamespaces))
		for _, ns := range o.watchNamespaces {
			cacheOpts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Cache:                         cacheOpts,
		Metrics:                       metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:        o.probeAddr,
		LeaderElection:                o.leaderElect,
		LeaderElectionID:              o.leaderElectionID,
		LeaderElectionNamespace:       o.leaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       durationPtr(30 * time.Second),
	})
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	if err := (&snapshot.Reconciler{Config: o.snapshot}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the %s controller: %w", snapshot.ControllerName, err)
	}
	if err := (&batchsandbox.Reconciler{
		Tasks: batchsandbox.TaskOptions{ExecutorImage: o.taskExecutorImage},
		Pause: batchsandbox.PauseConfig{ResumePullSecret: o.resumePullSecret},
	}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the %s controller: %w", batchsandbox.ControllerName, err)
	}
	if err := (&batchsandbox.PoolReconciler{}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the %s controller: %w", batchsandbox.PoolControllerName, err)
	}
	if err := pool.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the pool controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, fmt.Errorf("adding the health check: %w", err)
	}
	// Ready once the informers have synced: before that the reconcilers
	// would act on an empty cache.
	if err := mgr.AddReadyzCheck("cache", func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("informer caches not synced")
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("adding the readiness check: %w", err)
	}
	return mgr, nil
}

func durationPtr(d time.Duration) *time.Duration { return &d }
