package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"

	corev1 "k8s.io/api/core/v1"

	"github.com/opensandbox-go/opensandbox/internal/kubestore"
	"github.com/opensandbox-go/opensandbox/internal/runtime/kubernetes"
	"github.com/opensandbox-go/opensandbox/internal/serverconfig"
)

// newKubernetesRuntime turns the [runtime], [kubernetes] and
// [secure_runtime] tables into the Kubernetes driver and the store that
// keeps the server's records in the same namespace, shared by every
// replica. The returned func stops the driver's informers.
func newKubernetesRuntime(ctx context.Context, cfg serverconfig.Config, logger *slog.Logger) (*kubernetes.Runtime, *kubestore.Store, func(), error) {
	k := cfg.Kubernetes
	res, err := k.ExecdInitResources.Requirements()
	if err != nil {
		return nil, nil, nil, err
	}
	rt, err := kubernetes.New(ctx, kubernetes.Options{
		Kubeconfig:         k.KubeconfigPath,
		Namespace:          k.Namespace,
		ServiceAccount:     k.ServiceAccount,
		ExecdImage:         cfg.Runtime.ExecdImage,
		ImagePullPolicy:    corev1.PullPolicy(k.ImagePullPolicy),
		TemplateFile:       k.BatchSandboxTemplateFile,
		CreateTimeout:      k.CreateTimeout(),
		SnapshotTimeout:    k.SnapshotTimeout(),
		InformerResync:     k.InformerResync(),
		ReadQPS:            qps(k.ReadQPS),
		ReadBurst:          k.ReadBurst,
		WriteQPS:           qps(k.WriteQPS),
		WriteBurst:         k.WriteBurst,
		ExecdInitResources: res,
		RuntimeClassName:   cfg.SecureRuntime.K8sRuntimeClass,
		Egress:             kubernetesEgress(cfg.Egress, logger),
		Logger:             logger,
	})
	if err != nil {
		return nil, nil, nil, err
	}
	st, err := kubestore.New(kubestore.Options{
		Client:    rt.APIClient(),
		Reader:    rt.Reader(),
		Namespace: rt.Namespace(),
		Owner:     replicaName(),
	})
	if err != nil {
		rt.Close()
		return nil, nil, nil, err
	}
	return rt, st, rt.Close, nil
}

// kubernetesEgress maps the [egress] table onto the driver's sidecar
// options; the keys only the Docker driver uses are warned about.
func kubernetesEgress(e serverconfig.Egress, logger *slog.Logger) kubernetes.EgressOptions {
	if e.UpstreamCAFile != "" || e.EgressPath != "" {
		logger.Warn("egress.upstream_ca_file and egress.egress_path are not used on Kubernetes: the sidecar runs egress.image")
	}
	return kubernetes.EgressOptions{
		Image: e.Image, Mode: e.Mode, DNSUpstreams: e.DNSUpstream, DenyWebhook: e.DenyWebhook,
		BlockDoH: e.BlockDoH443, DoHBlocklist: e.DoHBlocklist, AllowMetadata: e.AllowMetadata,
	}
}

// qps maps the config's rate (0 = unlimited) onto the driver's (0 = its
// default, negative = unlimited).
func qps(v float64) float32 {
	if v == 0 {
		return -1
	}
	return float32(v)
}

// replicaName names this server process in the shared create journal: the
// host (a pod's name) and a random suffix, so that two processes on one
// host never take each other's creates in flight for abandoned ones.
func replicaName() string {
	host, _ := os.Hostname()
	var b [4]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s-%s", host, hex.EncodeToString(b[:]))
}
