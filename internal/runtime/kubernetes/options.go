package kubernetes

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/opensandbox-go/opensandbox/internal/kubepool"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

// Defaults of Options.
const (
	DefaultExecdImage      = "opensandbox/execd:latest"
	DefaultCreateTimeout   = 60 * time.Second
	DefaultSnapshotTimeout = 900 * time.Second
	// DefaultCreatePollInterval is the default of Options.CreatePollInterval.
	DefaultCreatePollInterval = 250 * time.Millisecond
	DefaultReadQPS            = 50
	DefaultReadBurst          = 100
	DefaultWriteQPS           = 20
	DefaultWriteBurst         = 40
	// syncTimeout bounds New's wait for the informer cache when ctx has
	// no deadline of its own.
	syncTimeout = 2 * time.Minute
)

// serviceAccountNamespace is where a pod finds its own namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Options configure a Runtime; they map one to one onto the server's
// [kubernetes] configuration table. Zero values select the defaults.
type Options struct {
	// RESTConfig is the cluster to talk to; nil loads Kubeconfig, or else
	// KUBECONFIG, the in-cluster credentials or ~/.kube/config.
	RESTConfig *rest.Config
	// Kubeconfig is the path of a kubeconfig file (kubeconfig_path).
	Kubeconfig string
	// Namespace holds the sandboxes; default the server pod's own
	// namespace in a cluster, else "default".
	Namespace string
	// ServiceAccount runs the sandbox pods; "" is the namespace's default.
	// Its token is never mounted into sandboxes.
	ServiceAccount string
	// ExecdImage is the image the init container copies execd from.
	ExecdImage string
	// ImagePullPolicy of the sandbox and execd images; default IfNotPresent.
	ImagePullPolicy corev1.PullPolicy
	// TemplateFile is a YAML BatchSandbox whose spec.template is the base
	// every sandbox's pod template is merged into (batchsandbox_template_file).
	TemplateFile string
	// CreateTimeout bounds the wait of Create for the pod and execd.
	CreateTimeout time.Duration
	// CreatePollInterval is the longest delay between two looks at a
	// sandbox Create waits for (sandbox_create_poll_interval_seconds); the
	// looks read the informer cache, so they cost no API request. Default
	// 250ms.
	CreatePollInterval time.Duration
	// DisableInformer reads Get and List (and every wait) from the API
	// server instead of an informer cache (informer_enabled = false).
	DisableInformer bool
	// SnapshotTimeout bounds CommitSnapshot's wait for the snapshot.
	SnapshotTimeout time.Duration
	// InformerResync is the informers' resync period; 0 is none.
	InformerResync time.Duration
	// ReadQPS/ReadBurst limit the reads (informers, logs, events),
	// WriteQPS/WriteBurst the writes to the API server; a QPS of 0 is
	// the default, a negative one no limit.
	ReadQPS    float32
	ReadBurst  int
	WriteQPS   float32
	WriteBurst int
	// ExecdInitResources are the init container's requests and limits.
	ExecdInitResources corev1.ResourceRequirements
	// RuntimeClassName of the sandbox pods (secure_runtime); "" none.
	RuntimeClassName string
	// Egress configures the egress sidecar of sandboxes with a network
	// policy (the [egress] table).
	Egress EgressOptions
	// Logger receives the driver's logs; nil is slog.Default().
	Logger *slog.Logger
}

// EgressOptions configure the egress sidecar; they map onto the server's
// [egress] table.
type EgressOptions struct {
	// Image runs the sidecar (egress.image); default DefaultEgressImage.
	Image string
	// Mode is the enforcement mode (egress.mode); "" is the sidecar's
	// default (dns+nft).
	Mode string
	// DNSUpstreams are the resolvers the sidecar forwards allowed names
	// to (egress.dns_upstream); empty: the pod's resolv.conf.
	DNSUpstreams []string
	// DenyWebhook receives the sidecar's denials (egress.deny_webhook).
	DenyWebhook string
	// BlockDoH and DoHBlocklist drop DNS over HTTPS (egress.block_doh_443,
	// egress.doh_blocklist).
	BlockDoH     bool
	DoHBlocklist []string
	// AllowMetadata lets policies allow link-local metadata addresses
	// (egress.allow_metadata).
	AllowMetadata bool
}

func (o Options) withDefaults() Options {
	if o.ExecdImage == "" {
		o.ExecdImage = DefaultExecdImage
	}
	if o.Egress.Image == "" {
		o.Egress.Image = DefaultEgressImage
	}
	if o.ImagePullPolicy == "" {
		o.ImagePullPolicy = corev1.PullIfNotPresent
	}
	if o.CreateTimeout <= 0 {
		o.CreateTimeout = DefaultCreateTimeout
	}
	if o.CreatePollInterval <= 0 {
		o.CreatePollInterval = DefaultCreatePollInterval
	}
	if o.SnapshotTimeout <= 0 {
		o.SnapshotTimeout = DefaultSnapshotTimeout
	}
	if o.ReadQPS == 0 {
		o.ReadQPS = DefaultReadQPS
	}
	if o.ReadBurst <= 0 {
		o.ReadBurst = DefaultReadBurst
	}
	if o.WriteQPS == 0 {
		o.WriteQPS = DefaultWriteQPS
	}
	if o.WriteBurst <= 0 {
		o.WriteBurst = DefaultWriteBurst
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Runtime is the Kubernetes driver.
type Runtime struct {
	opts Options
	ns   string
	log  *slog.Logger
	// base is the pod template of TemplateFile (empty without one).
	base corev1.PodTemplateSpec

	// Pools serves the lifecycle API's /pools on the namespace's Pools.
	*kubepool.Pools

	cache  cache.Cache
	direct client.Client        // reads from and writes to the API server
	cached client.Client        // reads from the cache, writes to the API
	api    client.Reader        // reads from the API server
	cs     kubernetes.Interface // logs and events
	http   *http.Client
	claims claimKeeper

	stop    context.CancelFunc
	stopped chan struct{} // closed when the cache has stopped
	once    sync.Once
}

var (
	_ runtime.Runtime = (*Runtime)(nil)
	_ runtime.Runner  = (*Runtime)(nil)
)

// Scheme knows the kinds the driver uses.
func Scheme() (*apiruntime.Scheme, error) {
	s := apiruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := sandboxv1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// New connects to the cluster, starts the informer cache of the namespace
// and returns once it has synced (bounded by ctx). Run or Close stop it.
func New(ctx context.Context, opts Options) (*Runtime, error) {
	opts = opts.withDefaults()
	cfg, err := restConfig(opts)
	if err != nil {
		return nil, err
	}
	ns := opts.Namespace
	if ns == "" {
		ns = defaultNamespace()
	}
	r := &Runtime{opts: opts, ns: ns, log: opts.Logger.With("runtime", "kubernetes", "namespace", ns),
		http: &http.Client{Transport: &http.Transport{Proxy: nil}}}
	if opts.TemplateFile != "" {
		if r.base, err = loadTemplate(opts.TemplateFile); err != nil {
			return nil, err
		}
	}
	scheme, err := Scheme()
	if err != nil {
		return nil, fmt.Errorf("kubernetes: scheme: %w", err)
	}
	read := rest.CopyConfig(cfg)
	read.QPS, read.Burst = opts.ReadQPS, opts.ReadBurst
	write := rest.CopyConfig(cfg)
	write.QPS, write.Burst = opts.WriteQPS, opts.WriteBurst

	api, err := client.New(read, client.Options{Scheme: scheme})
	if err != nil {
		return nil, apiErr(err, "kubernetes: client of %s", cfg.Host)
	}
	cs, err := kubernetes.NewForConfig(read)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: clientset of %s: %w", cfg.Host, err)
	}
	direct, err := client.New(write, client.Options{Scheme: scheme})
	if err != nil {
		return nil, apiErr(err, "kubernetes: client of %s", cfg.Host)
	}
	r.api, r.cs, r.direct = api, cs, direct
	r.Pools = kubepool.New(direct, ns)
	if opts.DisableInformer {
		// Reads go to the API server (with the read limits), writes too.
		cl, err := client.New(write, client.Options{Scheme: scheme, Cache: &client.CacheOptions{Reader: api}})
		if err != nil {
			return nil, apiErr(err, "kubernetes: client of %s", cfg.Host)
		}
		r.cached = cl
		r.stop, r.stopped = func() {}, make(chan struct{})
		close(r.stopped)
		r.log.Info("kubernetes runtime ready (no informer cache)", "host", cfg.Host)
		return r, nil
	}
	if err := r.startCache(ctx, read, write, scheme); err != nil {
		return nil, err
	}
	r.log.Info("kubernetes runtime ready", "host", cfg.Host)
	return r, nil
}

// startCache starts the informer cache of the namespace and waits (bounded
// by ctx and syncTimeout) until it has synced.
func (r *Runtime) startCache(ctx context.Context, read, write *rest.Config, scheme *apiruntime.Scheme) error {
	opts, ns := r.opts, r.ns
	ours, err := hasLabel(labelID)
	if err != nil {
		return err
	}
	snaps, err := hasLabel(labelSnapshotID)
	if err != nil {
		return err
	}
	var resync *time.Duration
	if opts.InformerResync > 0 {
		resync = &opts.InformerResync
	}
	c, err := cache.New(read, cache.Options{
		Scheme:            scheme,
		SyncPeriod:        resync,
		DefaultNamespaces: map[string]cache.Config{ns: {}},
		ByObject: map[client.Object]cache.ByObject{
			&sandboxv1alpha1.BatchSandbox{}:    {Label: ours},
			&corev1.Pod{}:                      {Label: ours},
			&corev1.Secret{}:                   {Label: ours},
			&sandboxv1alpha1.SandboxSnapshot{}: {Label: snaps},
		},
	})
	if err != nil {
		return apiErr(err, "kubernetes: informer cache")
	}
	cl, err := client.New(write, client.Options{Scheme: scheme, Cache: &client.CacheOptions{Reader: c}})
	if err != nil {
		return apiErr(err, "kubernetes: client of %s", write.Host)
	}
	r.cache, r.cached = c, cl
	// The informers get one object of each kind so that they exist (and
	// are waited for) before the first Get.
	for _, obj := range []client.Object{&sandboxv1alpha1.BatchSandbox{}, &corev1.Pod{}, &corev1.Secret{}, &sandboxv1alpha1.SandboxSnapshot{}} {
		if _, err := c.GetInformer(ctx, obj); err != nil {
			return apiErr(err, "kubernetes: informer of %T", obj)
		}
	}
	cctx, cancel := context.WithCancel(context.Background())
	r.stop, r.stopped = cancel, make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		defer close(r.stopped)
		errc <- c.Start(cctx)
	}()
	sctx, scancel := context.WithTimeout(ctx, syncTimeout)
	defer scancel()
	if !c.WaitForCacheSync(sctx) {
		r.Close()
		select {
		case err := <-errc:
			return apiErr(err, "kubernetes: informer cache of namespace %s", ns)
		default:
		}
		return fmt.Errorf("kubernetes: informer cache of namespace %s did not sync (%v): %w", ns, sctx.Err(), runtime.ErrUnavailable)
	}
	return nil
}

// Namespace is where the driver's sandboxes live.
func (r *Runtime) Namespace() string { return r.ns }

// Reader reads the driver's objects (BatchSandboxes, pods and Secrets
// labelled as sandboxes', SandboxSnapshots) as Get and List see them:
// from the informer cache, or the API server without one.
func (r *Runtime) Reader() client.Reader { return r.cached }

// APIClient reads from and writes to the API server directly, with the
// write limits; for objects the cache does not hold.
func (r *Runtime) APIClient() client.Client { return r.direct }

// Run returns when ctx ends, after the informers have stopped.
func (r *Runtime) Run(ctx context.Context) {
	<-ctx.Done()
	r.Close()
}

// Close stops the informers and waits for them; Get and List fail after it.
func (r *Runtime) Close() {
	r.once.Do(func() {
		r.stop()
		<-r.stopped
	})
}

func hasLabel(key string) (labels.Selector, error) {
	req, err := labels.NewRequirement(key, selection.Exists, nil)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: selector %s: %w", key, err)
	}
	return labels.NewSelector().Add(*req), nil
}

func restConfig(opts Options) (*rest.Config, error) {
	if opts.RESTConfig != nil {
		return rest.CopyConfig(opts.RESTConfig), nil
	}
	if opts.Kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", opts.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("kubernetes: kubeconfig %s: %w: %w", opts.Kubeconfig, runtime.ErrInvalid, err)
		}
		return cfg, nil
	}
	cfg, err := ctrlconfig.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes: no cluster configuration (KUBECONFIG, in-cluster or ~/.kube/config): %w: %w", runtime.ErrUnavailable, err)
	}
	return cfg, nil
}

func defaultNamespace() string {
	if b, err := os.ReadFile(serviceAccountNamespace); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns
		}
	}
	return "default"
}

// loadTemplate reads the pod template of a YAML BatchSandbox.
func loadTemplate(path string) (corev1.PodTemplateSpec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return corev1.PodTemplateSpec{}, fmt.Errorf("kubernetes: batchsandbox template: %w: %w", runtime.ErrInvalid, err)
	}
	var b sandboxv1alpha1.BatchSandbox
	if err := utilyaml.Unmarshal(data, &b); err != nil {
		return corev1.PodTemplateSpec{}, fmt.Errorf("kubernetes: batchsandbox template %s: %w: %w", path, runtime.ErrInvalid, err)
	}
	if b.Spec.Template == nil {
		return corev1.PodTemplateSpec{}, fmt.Errorf("kubernetes: batchsandbox template %s: no spec.template: %w", path, runtime.ErrInvalid)
	}
	return *b.Spec.Template, nil
}
