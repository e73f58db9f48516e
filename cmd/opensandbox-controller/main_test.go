package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opensandbox-go/opensandbox/internal/kubetest"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

func TestParseFlags(t *testing.T) {
	o, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !o.leaderElect || o.probeAddr != ":8081" || o.metricsAddr != ":8080" || o.burst != 200 || o.qps != 100 ||
		o.leaderElectionID != LeaderElectionID || o.logLevel != slog.LevelInfo {
		t.Errorf("defaults %+v", o)
	}
	o, err = parseFlags([]string{"--leader-elect=false", "--kube-client-burst", "50", "--log-level", "debug",
		"--health-probe-bind-address", "127.0.0.1:9000", "--metrics-bind-address", "0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.leaderElect || o.burst != 50 || o.logLevel != slog.LevelDebug || o.probeAddr != "127.0.0.1:9000" || o.metricsAddr != "0" {
		t.Errorf("parsed %+v", o)
	}
	o, err = parseFlags([]string{"--watch-namespace", "team-a, team-b"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.watchNamespaces, []string{"team-a", "team-b"}) || o.leaderElectionNamespace != "team-a" {
		t.Errorf("--watch-namespace: namespaces %q, lease namespace %q", o.watchNamespaces, o.leaderElectionNamespace)
	}
	// In a pod, the Lease stays in the controller's own namespace (where
	// deploy/controller's Role allows it), whatever it watches.
	saFile := filepath.Join(t.TempDir(), "namespace")
	if err := os.WriteFile(saFile, []byte("opensandbox-system"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer func(old string) { serviceAccountNamespaceFile = old }(serviceAccountNamespaceFile)
	serviceAccountNamespaceFile = saFile
	o, err = parseFlags([]string{"--watch-namespace", "team-a"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.leaderElectionNamespace != "" {
		t.Errorf("in a pod with --watch-namespace team-a, lease namespace %q, want the pod's own (empty)", o.leaderElectionNamespace)
	}
	for _, bad := range [][]string{{"--kube-client-burst", "0"}, {"--log-level", "loud"}, {"extra"}, {"--nope"}, {"--watch-namespace", "Not_A_Namespace"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) accepted", bad)
		}
	}
	if _, err := parseFlags([]string{"-h"}, io.Discard); err != flag.ErrHelp {
		t.Errorf("-h: %v", err)
	}
	if code, err := run(context.Background(), []string{"--kube-client-qps", "-1"}, io.Discard); code != 2 || err == nil {
		t.Errorf("bad flag: exit %d, %v", code, err)
	}
}

// lockedBuffer collects the program's log output.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// freeAddr returns a loopback address with a port that was free a moment
// ago (the manager takes an address, not a listener).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// writeKubeconfig writes a kubeconfig reaching env's apiserver.
func writeKubeconfig(t *testing.T, env *kubetest.Env) string {
	t.Helper()
	cfg := env.Config
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRun runs the whole program against a real apiserver: it takes the
// leader Lease, answers its probes and metrics, logs JSON, reconciles a
// BatchSandbox, and stops cleanly when its context ends.
func TestRun(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t)
	probe, metrics := freeAddr(t), freeAddr(t)
	logs := &lockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		code, err := run(ctx, []string{"--kubeconfig", writeKubeconfig(t, env), "--leader-election-namespace", ns,
			"--health-probe-bind-address", probe, "--metrics-bind-address", metrics}, logs)
		done <- result{code, err}
	}()
	stopped := false
	defer func() {
		if !stopped {
			cancel()
			<-done
		}
	}()

	deadline := time.Now().Add(60 * time.Second)
	poll := func(what string, cond func() error) {
		t.Helper()
		for {
			err := cond()
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %v\nlogs:\n%s", what, err, logs.String())
			}
			select {
			case r := <-done:
				stopped = true
				t.Fatalf("program exited early (%d, %v)\nlogs:\n%s", r.code, r.err, logs.String())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	get := func(url string) (string, error) {
		resp, err := http.Get(url)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return "", err
		}
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("%s: %s %s", url, resp.Status, body)
		}
		return string(body), nil
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		poll(path, func() error { _, err := get("http://" + probe + path); return err })
	}
	poll("leader Lease", func() error {
		var l coordinationv1.Lease
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: LeaderElectionID}, &l); err != nil {
			return err
		}
		if ptr.Deref(l.Spec.HolderIdentity, "") == "" {
			return fmt.Errorf("lease has no holder")
		}
		return nil
	})

	b := &sandboxv1alpha1.BatchSandbox{
		ObjectMeta: metav1.ObjectMeta{Name: "run", Namespace: ns},
		Spec: sandboxv1alpha1.BatchSandboxSpec{
			Replicas: ptr.To(int32(2)),
			Template: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "s", Image: "opensandbox/base:latest"}}}},
		},
	}
	if err := env.Client.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	poll("pods of the BatchSandbox", func() error {
		var list corev1.PodList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{sandboxv1alpha1.LabelBatchSandboxName: "run"}); err != nil {
			return err
		}
		if len(list.Items) != 2 {
			return fmt.Errorf("%d pods", len(list.Items))
		}
		return nil
	})
	poll("reconcile metrics", func() error {
		body, err := get("http://" + metrics + "/metrics")
		if err != nil {
			return err
		}
		if !strings.Contains(body, `controller_runtime_reconcile_total{controller="batchsandbox-template",result="success"}`) {
			return fmt.Errorf("no reconcile counter for the controller")
		}
		return nil
	})

	cancel()
	select {
	case r := <-done:
		stopped = true
		if r.code != 0 || r.err != nil {
			t.Fatalf("exit %d, %v\nlogs:\n%s", r.code, r.err, logs.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("program did not stop within 60 s of its context ending")
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	for _, line := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if _, ok := rec["msg"]; !ok {
			t.Fatalf("log line without msg: %q", line)
		}
	}
	// client-go's klog output (leader election) is bridged into the same
	// JSON lines.
	if !strings.Contains(logs.String(), `"msg":"Successfully acquired lease"`) {
		t.Errorf("leader election not logged as JSON:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), `"msg":"stopped"`) {
		t.Errorf("no stop logged:\n%s", logs.String())
	}
}
