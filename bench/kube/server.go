package main

import (
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/opensandbox-go/opensandbox/bench/internal/benchkit"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// serverKey is the API key of the servers the bench starts.
const serverKey = "kube-bench-key"

// serverSide measures create -> first command through the lifecycle API
// (create, execd endpoint, `echo hi` through it) on the server with the
// kubernetes runtime — cold, and from a warm pool made through POST
// /pools — and, in the same run, on the server with the Docker runtime.
// The operator of the pool-mode measurement runs throughout.
func (b *bench) serverSide(rounds int) error {
	kaddr, kstop, err := benchkit.StartServerWith(b.server, serverKey, func(dir string) string {
		return fmt.Sprintf("[runtime]\ntype = \"kubernetes\"\nexecd_image = \"opensandbox/execd:latest\"\n\n[kubernetes]\nkubeconfig_path = %q\nnamespace = %q\n", b.kubecfg, b.ns)
	})
	if err != nil {
		return fmt.Errorf("server on kubernetes: %w", err)
	}
	defer kstop()
	daddr, dstop, err := benchkit.StartServer(b.server, b.execd, serverKey)
	if err != nil {
		return fmt.Errorf("server on docker: %w", err)
	}
	defer dstop()
	kube, docker := "http://"+kaddr, "http://"+daddr

	tmpl, err := json.Marshal(corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		TerminationGracePeriodSeconds: ptr(int64(0)),
		Containers: []corev1.Container{{Name: "main", Image: b.image, ImagePullPolicy: corev1.PullIfNotPresent,
			Command: []string{"tail", "-f", "/dev/null"}}},
	}})
	if err != nil {
		return err
	}
	const pool = "bench-warm"
	capacity := map[string]int{"bufferMin": rounds, "bufferMax": rounds, "poolMin": 0, "poolMax": 2 * rounds}
	if _, err := benchkit.Call("POST", kube+"/v1/pools", serverKey, map[string]any{"name": pool, "template": json.RawMessage(tmpl), "capacitySpec": capacity}, nil); err != nil {
		return err
	}
	if err := waitPoolReady(kube, pool, rounds); err != nil {
		return err
	}

	cold := sandbox.CreateSandboxRequest{Image: &sandbox.ImageSpec{URI: b.image}, Entrypoint: []string{"tail", "-f", "/dev/null"},
		ResourceLimits: map[string]string{"cpu": "1", "memory": "256Mi"}}
	pooled := cold
	pooled.Extensions = map[string]string{"poolRef": pool}
	// One of each first (image and page caches, connections), not counted.
	for _, side := range []struct {
		base string
		req  sandbox.CreateSandboxRequest
	}{{kube, cold}, {docker, cold}} {
		if _, err := benchkit.FirstCommand(side.base, serverKey, side.req); err != nil {
			return err
		}
	}
	var kc, kp, dc []time.Duration
	for range rounds {
		for _, m := range []struct {
			base string
			req  sandbox.CreateSandboxRequest
			out  *[]time.Duration
		}{{kube, cold, &kc}, {kube, pooled, &kp}, {docker, cold, &dc}} {
			d, err := benchkit.FirstCommand(m.base, serverKey, m.req)
			if err != nil {
				return err
			}
			*m.out = append(*m.out, d)
		}
		// The pool refills the pod just taken before the next round.
		if err := waitPoolReady(kube, pool, rounds); err != nil {
			return err
		}
	}
	p50 := func(d []time.Duration) time.Duration { return benchkit.Percentile(d, 50).Round(time.Millisecond) }
	verdict := "met"
	if float64(p50(kp)) > 0.1*float64(p50(kc)) {
		verdict = "MISSED"
	}
	fmt.Printf("kube server: create -> first command through the API, p50 of %d: Kubernetes %v | Docker %v | ratio %.2f\n",
		rounds, p50(kc), p50(dc), float64(p50(kc))/float64(p50(dc)))
	fmt.Printf("kube server: pooled create -> first command p50 %v (p95 %v) | cold %v | ratio %.3f | target <= 0.1: %s\n",
		p50(kp), benchkit.Percentile(kp, 95).Round(time.Millisecond), p50(kc), float64(p50(kp))/float64(p50(kc)), verdict)
	return nil
}

// waitPoolReady waits until the pool has n available pods, as GET
// /v1/pools/{name} reports them.
func waitPoolReady(base, name string, n int) error {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var p struct {
			Status struct{ Available int } `json:"status"`
		}
		if _, err := benchkit.Call("GET", base+"/v1/pools/"+name, serverKey, nil, &p); err != nil {
			return err
		}
		if p.Status.Available >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pool %s: %d of %d pods available after 5 minutes", name, p.Status.Available, n)
		}
		time.Sleep(200 * time.Millisecond) // polling the pool's status, bounded by the deadline
	}
}
