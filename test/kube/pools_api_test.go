package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opensandbox-go/opensandbox/internal/kubepool"
	"github.com/opensandbox-go/opensandbox/internal/lifecycle"
	"github.com/opensandbox-go/opensandbox/internal/openapitest"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/internal/server"
	"github.com/opensandbox-go/opensandbox/internal/store"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// poolsOnly is a runtime with pools and nothing else: kubepool for the
// /pools routes. Its sandbox methods (the nil embedded Runtime) must not
// be reached: the test neither runs the server's background work nor
// calls a sandbox route. (The server on the kubernetes runtime serves
// /pools through that runtime, which embeds *kubepool.Pools the same way.)
type poolsOnly struct {
	runtime.Runtime
	*kubepool.Pools
}

// storeOverrides adapts the bolt store to the server's Store.
type storeOverrides struct{ *store.Store }

func (s storeOverrides) GetOverrides(ctx context.Context, id string) (lifecycle.Overrides, error) {
	var o lifecycle.Overrides
	_, err := s.Store.GetOverrides(ctx, id, &o)
	return o, err
}

func (s storeOverrides) PutOverrides(ctx context.Context, id string, o lifecycle.Overrides) error {
	return s.Store.PutOverrides(ctx, id, o)
}

// poolView is the part of a PoolResponse the test reads.
type poolView struct {
	Name         string `json:"name"`
	CapacitySpec struct {
		BufferMax, BufferMin, PoolMax, PoolMin int32
	} `json:"capacitySpec"`
	Status struct {
		Total, Allocated, Available int32
		Revision                    string
	} `json:"status"`
}

// TestPoolsAPI creates a pool through POST /v1/pools on a server whose
// pools are kubepool on the test cluster, with the operator running: the
// pool fills to bufferMin with ready execd pods, follows a capacity change
// made through PUT, and its pods go when it is deleted through DELETE.
func TestPoolsAPI(t *testing.T) {
	c := connect(t)
	ns := c.namespace(t)
	c.startOperator(t, ns)
	cl := c.sandboxClient(t)

	st, err := store.Open(store.Options{Path: filepath.Join(t.TempDir(), "store.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	const key = "pools-e2e-key"
	srv, err := server.New(server.Config{
		Runtime: poolsOnly{Pools: kubepool.New(cl, ns)},
		Store:   storeOverrides{st},
		APIKey:  key,
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	spec := openapitest.Load(t, "api/lifecycle.yaml")
	hc := &http.Client{Transport: spec.Transport(t, nil), Timeout: 30 * time.Second}
	call := func(method, path string, body any, want int) []byte {
		t.Helper()
		var rd io.Reader
		if body != nil {
			data, err := json.Marshal(body)
			if err != nil {
				t.Fatal(err)
			}
			rd = bytes.NewReader(data)
		}
		req, err := http.NewRequest(method, hs.URL+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(sandbox.APIKeyHeader, key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, data, want)
		}
		return data
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*podTimeout)
	defer cancel()

	// waitPool polls GET /v1/pools/warm until the operator reports total
	// pods, available of them ready and idle.
	waitPool := func(total, available int32) {
		t.Helper()
		var last poolView
		err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			if err := json.Unmarshal(call("GET", "/v1/pools/warm", nil, http.StatusOK), &last); err != nil {
				return false, err
			}
			return last.Status.Total == total && last.Status.Available == available, nil
		})
		if err != nil {
			t.Fatalf("pool warm: want total %d available %d: %v (last %+v)", total, available, err, last)
		}
	}

	start := time.Now()
	created := call("POST", "/v1/pools", map[string]any{
		"name":         "warm",
		"template":     execdPodTemplate(),
		"capacitySpec": map[string]int{"bufferMin": 2, "bufferMax": 3, "poolMin": 0, "poolMax": 5},
	}, http.StatusCreated)
	var p poolView
	if err := json.Unmarshal(created, &p); err != nil || p.Name != "warm" || p.CapacitySpec.BufferMin != 2 {
		t.Fatalf("POST reply %s: %v", created, err)
	}
	waitPool(2, 2)
	t.Logf("pool filled to bufferMin=2 ready pods in %v", time.Since(start))

	// The pods are real sandboxes: labelled with the pool, ready, execd answering.
	pods := poolPodsReady(ctx, t, cl, ns, "warm", 2)
	for _, pod := range pods {
		pingExecd(t, pod.Status.PodIP)
	}
	var v poolView
	if err := json.Unmarshal(call("GET", "/v1/pools/warm", nil, http.StatusOK), &v); err != nil || v.Status.Revision == "" {
		t.Errorf("GET after fill: %+v, %v (want a revision)", v, err)
	}

	// A capacity change through PUT is followed.
	call("PUT", "/v1/pools/warm", map[string]any{
		"capacitySpec": map[string]int{"bufferMin": 3, "bufferMax": 3, "poolMin": 0, "poolMax": 5},
	}, http.StatusOK)
	waitPool(3, 3)
	var list struct{ Items []poolView }
	if err := json.Unmarshal(call("GET", "/v1/pools", nil, http.StatusOK), &list); err != nil || len(list.Items) != 1 || list.Items[0].CapacitySpec.BufferMin != 3 {
		t.Errorf("GET /v1/pools = %+v, %v", list, err)
	}

	// DELETE removes the Pool, and its pods go with it.
	call("DELETE", "/v1/pools/warm", nil, http.StatusNoContent)
	call("GET", "/v1/pools/warm", nil, http.StatusNotFound)
	err = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var list corev1.PodList
		if err := cl.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{sandboxv1alpha1.LabelPoolName: "warm"}); err != nil {
			return false, err
		}
		return len(list.Items) == 0, nil
	})
	if err != nil {
		t.Errorf("the deleted pool's pods are not gone: %v", err)
	}
}

// poolPodsReady returns the pool's pods, checking there are n, all Running
// and Ready.
func poolPodsReady(ctx context.Context, t *testing.T, cl client.Client, ns, pool string, n int) []corev1.Pod {
	t.Helper()
	var list corev1.PodList
	if err := cl.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{sandboxv1alpha1.LabelPoolName: pool}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != n {
		t.Fatalf("pool %s has %d pods, want %d", pool, len(list.Items), n)
	}
	for _, pod := range list.Items {
		ready := false
		for _, cond := range pod.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if pod.Status.Phase != corev1.PodRunning || !ready || pod.Status.PodIP == "" {
			t.Errorf("pod %s: phase %s ready %v ip %q", pod.Name, pod.Status.Phase, ready, pod.Status.PodIP)
		}
	}
	return list.Items
}
