// Package kubetest starts a real kube-apiserver and etcd for tests
// (controller-runtime's envtest) with the OpenSandbox CRDs of deploy/crds
// installed, and hands out a client that knows our kinds.
//
//	env := kubetest.Start(t)          // stops on t.Cleanup
//	ns := env.Namespace(t)            // a fresh namespace per test
//	err := env.Client.Create(ctx, &v1alpha1.Pool{...})
//
// The binaries (etcd, kube-apiserver) come from the directory named by
// KUBEBUILDER_ASSETS, which `bash scripts/kube/assets.sh` prints (building
// them once into a cache). Without them a test skips, and fails under CI=true
// (internal/testenv). Nothing is downloaded. There is no kubelet, scheduler or
// controller-manager: pods stay Pending and namespaces are never removed.
//
// This package is for tests only.
package kubetest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/opensandbox-go/opensandbox/internal/openapitest"
	"github.com/opensandbox-go/opensandbox/internal/testenv"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

// EnvAssets names the directory holding etcd and kube-apiserver.
const EnvAssets = "KUBEBUILDER_ASSETS"

// startTimeout bounds the start (and stop) of each control-plane binary; a
// shared two-core machine needs more than envtest's default of 20 s.
const startTimeout = 90 * time.Second

// Env is a running apiserver with the OpenSandbox CRDs installed.
type Env struct {
	// Config reaches the apiserver as an administrator (for managers and
	// typed clients).
	Config *rest.Config
	// Scheme knows the built-in kinds and the OpenSandbox kinds.
	Scheme *runtime.Scheme
	// Client is a direct (uncached) client with Scheme.
	Client client.Client
	// CRDDir is the deploy/crds directory that was installed.
	CRDDir string
}

var setLoggerOnce sync.Once

// Start starts etcd and kube-apiserver, installs every CRD in deploy/crds
// and waits until they are served. They are stopped on t.Cleanup. Missing
// binaries stop the test through testenv.Missing.
func Start(t testing.TB) *Env {
	t.Helper()
	assets := os.Getenv(EnvAssets)
	if assets == "" {
		testenv.Missing(t, "%s is not set; run with %s=$(bash scripts/kube/assets.sh)", EnvAssets, EnvAssets)
	}
	for _, bin := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(assets, bin)); err != nil {
			testenv.Missing(t, "%s=%s lacks %s: %v", EnvAssets, assets, bin, err)
		}
	}
	crdDir := openapitest.RepoPath("deploy/crds")
	if st, err := os.Stat(crdDir); err != nil || !st.IsDir() {
		t.Fatalf("the CRD directory deploy/crds was not found above the test's directory: %v", err)
	}

	// controller-runtime's logger is process-wide; without one it prints a
	// stack trace after 30 s. Warnings and errors go to stderr.
	setLoggerOnce.Do(func() {
		crlog.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	})

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatalf("client-go scheme: %v", err)
	}
	if err := sandboxv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatalf("sandbox scheme: %v", err)
	}

	te := &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		CRDDirectoryPaths:        []string{crdDir},
		ErrorIfCRDPathMissing:    true,
		Scheme:                   scheme,
		ControlPlaneStartTimeout: startTimeout,
		ControlPlaneStopTimeout:  startTimeout,
		// envtest waits 10 s for the CRDs to be served; too short on a
		// loaded machine.
		CRDInstallOptions: envtest.CRDInstallOptions{MaxTime: startTimeout},
	}
	cfg, err := te.Start()
	if err != nil {
		t.Fatalf("starting kube-apiserver and etcd from %s: %v", assets, err)
	}
	t.Cleanup(func() {
		if err := te.Stop(); err != nil {
			t.Errorf("stopping kube-apiserver and etcd: %v", err)
		}
	})
	if len(te.CRDs) == 0 {
		t.Fatalf("no CRDs installed from %s", crdDir)
	}

	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return &Env{Config: cfg, Scheme: scheme, Client: c, CRDDir: crdDir}
}

// Namespace creates a namespace named after the test, with a random suffix,
// and returns its name. (Without a controller-manager a deleted namespace
// never goes away, so it is left to die with the apiserver.)
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespaceName(t.Name())}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Client.Create(ctx, ns); err != nil {
		t.Fatalf("creating namespace %s: %v", ns.Name, err)
	}
	return ns.Name
}

// namespaceName turns a test name into a DNS label: lower case, [a-z0-9-],
// at most 63 characters including a random 5-character suffix.
func namespaceName(testName string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(testName) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			if s := b.String(); s != "" && !strings.HasSuffix(s, "-") {
				b.WriteByte('-')
			}
		}
	}
	base := strings.Trim(b.String(), "-")
	if len(base) > 57 {
		base = strings.TrimRight(base[:57], "-")
	}
	if base == "" {
		base = "test"
	}
	return fmt.Sprintf("%s-%s", base, utilrand.String(5))
}

// StartManager runs a controller-runtime manager on env, caching namespace
// ns only, with what setup registers, until the returned stop is called or
// the test ends; stop waits for the manager to return. Tests may start
// several managers in one process (controller names are not checked).
func StartManager(t *testing.T, env *Env, ns string, setup func(ctrl.Manager) error) (stop func()) {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:     env.Scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Cache:      cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Controller: crconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatalf("manager: %v", err)
	}
	if err := setup(mgr); err != nil {
		t.Fatalf("set up the manager: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("manager stopped: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
