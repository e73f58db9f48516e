package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/internal/kubepool"
	"github.com/opensandbox-go/opensandbox/internal/kubetest"
	"github.com/opensandbox-go/opensandbox/internal/openapitest"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

const poolTemplate = `{"metadata":{"labels":{"app":"sandbox"}},"spec":{"containers":[{"name":"sandbox","image":"opensandbox/base:latest"}]}}`

func poolBody(name string, bufferMax, bufferMin, poolMax, poolMin int) string {
	c, _ := json.Marshal(map[string]int{"bufferMax": bufferMax, "bufferMin": bufferMin, "poolMax": poolMax, "poolMin": poolMin})
	return `{"name":"` + name + `","template":` + poolTemplate + `,"capacitySpec":` + string(c) + `}`
}

// On a runtime without runtime.Pools (the stub, like Docker) every pool
// route is 501 POOL_NOT_SUPPORTED, with and without the /v1 prefix, after
// the API key is checked and before the body is looked at.
func TestPoolsNotSupported(t *testing.T) {
	e := newEnv(t)
	for _, prefix := range []string{"/v1", ""} {
		for _, c := range []struct{ method, path, body string }{
			{"POST", "/pools", poolBody("p", 2, 1, 4, 0)},
			{"POST", "/pools", "not json"},
			{"GET", "/pools", ""},
			{"GET", "/pools/p", ""},
			{"PUT", "/pools/p", `{"capacitySpec":{"bufferMax":1,"bufferMin":1,"poolMax":1,"poolMin":1}}`},
			{"DELETE", "/pools/p", ""},
		} {
			call := c.method + " " + prefix + c.path
			var body any
			if c.body != "" {
				body = c.body
			}
			wantError(t, call, e.do(c.method, prefix+c.path, body), http.StatusNotImplemented,
				apierror.CodePoolNotSupported, "kubernetes runtime")
			wantError(t, call+" without key", e.do(c.method, prefix+c.path, body, sandbox.APIKeyHeader, ""),
				http.StatusUnauthorized, apierror.CodeMissingAPIKey)
		}
	}
	if r := e.do("PATCH", "/v1/pools/p", "{}"); r.status != http.StatusMethodNotAllowed {
		t.Errorf("PATCH /v1/pools/p = %s, want 405", r)
	}
	// Not offering pools is not a failure of the server: no warning.
	if logs := e.logs.String(); strings.Contains(logs, "level=WARN") {
		t.Errorf("501s were logged as warnings:\n%s", logs)
	}
}

// withPools is a runtime with pools: the stub for sandboxes and the real
// Kubernetes pools for the /pools routes.
type withPools struct {
	*stubRuntime
	*kubepool.Pools
}

// TestPoolsKubernetes drives the pool routes end to end over HTTP, on
// kubepool against a real kube-apiserver with the CRDs, every exchange
// checked against api/lifecycle.yaml.
func TestPoolsKubernetes(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t)
	e := newEnv(t, func(c *Config) {
		c.Runtime = &withPools{stubRuntime: c.Runtime.(*stubRuntime), Pools: kubepool.New(env.Client, ns)}
	})
	spec := openapitest.Load(t, "api/lifecycle.yaml")
	e.http.Client().Transport = spec.Transport(t, e.http.Client().Transport)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Create.
	before := time.Now().Add(-2 * time.Second)
	r := e.do("POST", "/v1/pools", poolBody("warm", 3, 1, 5, 0))
	if r.status != http.StatusCreated {
		t.Fatalf("POST /v1/pools = %s, want 201", r)
	}
	created := decode[poolResponse](t, r)
	if created.Name != "warm" || created.CapacitySpec != (poolCapacity{BufferMax: 3, BufferMin: 1, PoolMax: 5}) {
		t.Errorf("created = %+v", created)
	}
	if created.CreatedAt.Before(before) || created.CreatedAt.Location() != time.UTC {
		t.Errorf("createdAt = %v", created.CreatedAt)
	}
	if !strings.Contains(string(created.Template), `"image":"opensandbox/base:latest"`) {
		t.Errorf("template = %s", created.Template)
	}
	var obj sandboxv1alpha1.Pool
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "warm"}, &obj); err != nil {
		t.Fatalf("the Pool resource: %v", err)
	}
	if obj.Spec.Template.Spec.Containers[0].Image != "opensandbox/base:latest" || obj.Spec.CapacitySpec.BufferMin != 1 {
		t.Errorf("stored Pool spec = %+v", obj.Spec)
	}

	// Already exists.
	wantError(t, "POST existing", e.do("POST", "/v1/pools", poolBody("warm", 1, 0, 1, 0)),
		http.StatusConflict, apierror.CodePoolAlreadyExists, `pool "warm" already exists`)

	// Invalid bodies: nothing reaches the cluster, and the message names the field.
	for _, c := range []struct {
		name, body string
		fragments  []string
	}{
		{"malformed", `{"name":`, nil},
		{"empty", ``, []string{"body is empty"}},
		{"no name", `{"template":` + poolTemplate + `,"capacitySpec":{"bufferMax":1,"bufferMin":0,"poolMax":1,"poolMin":0}}`, []string{"name"}},
		{"bad name", poolBody("Bad_Name", 1, 0, 1, 0), []string{"name:", "Bad_Name"}},
		{"no template", `{"name":"x","capacitySpec":{"bufferMax":1,"bufferMin":0,"poolMax":1,"poolMin":0}}`, []string{"template"}},
		{"no containers", `{"name":"x","template":{"spec":{}},"capacitySpec":{"bufferMax":1,"bufferMin":0,"poolMax":1,"poolMin":0}}`, []string{"template.spec.containers"}},
		{"no capacity", `{"name":"x","template":` + poolTemplate + `}`, []string{"capacitySpec"}},
		{"missing poolMin", `{"name":"x","template":` + poolTemplate + `,"capacitySpec":{"bufferMax":1,"bufferMin":0,"poolMax":1}}`, []string{"capacitySpec.poolMin"}},
		{"not an int32", `{"name":"x","template":` + poolTemplate + `,"capacitySpec":{"bufferMax":4294967296,"bufferMin":0,"poolMax":1,"poolMin":0}}`, []string{"bufferMax"}},
		{"negative", poolBody("x", 1, -1, 1, 0), []string{"capacitySpec.bufferMin"}},
		{"bufferMin above bufferMax", poolBody("x", 1, 2, 3, 0), []string{"capacitySpec.bufferMin", "bufferMax"}},
		{"poolMin above poolMax", poolBody("x", 1, 0, 1, 2), []string{"capacitySpec.poolMin", "poolMax"}},
		// Refused by the apiserver (the CRD's schema), with its message.
		{"duplicate env", `{"name":"x","template":{"spec":{"containers":[{"name":"a","image":"b","env":[{"name":"E"},{"name":"E"}]}]}},"capacitySpec":{"bufferMax":1,"bufferMin":0,"poolMax":1,"poolMin":0}}`,
			[]string{"spec.template.spec.containers[0].env[1]", "Duplicate value"}},
	} {
		wantError(t, "POST "+c.name, e.do("POST", "/v1/pools", c.body), http.StatusBadRequest, apierror.CodeInvalidRequest, c.fragments...)
	}

	// The operator's report shows in GET.
	obj.Status = sandboxv1alpha1.PoolStatus{Total: 2, Allocated: 1, Available: 1, Updated: 2, Revision: "rev1"}
	if err := env.Client.Status().Update(ctx, &obj); err != nil {
		t.Fatalf("status update: %v", err)
	}
	r = e.do("GET", "/v1/pools/warm", nil)
	if r.status != http.StatusOK {
		t.Fatalf("GET /v1/pools/warm = %s", r)
	}
	if got := decode[poolResponse](t, r); got.Status != (poolStatus{Total: 2, Allocated: 1, Available: 1, Revision: "rev1"}) || !got.CreatedAt.Equal(created.CreatedAt) {
		t.Errorf("GET = %+v", got)
	}
	wantError(t, "GET missing", e.do("GET", "/v1/pools/missing", nil), http.StatusNotFound, apierror.CodePoolNotFound, `pool "missing" not found`)

	// List, by name.
	if r := e.do("POST", "/v1/pools", poolBody("cold", 0, 0, 0, 0)); r.status != http.StatusCreated {
		t.Fatalf("POST cold = %s", r)
	}
	r = e.do("GET", "/v1/pools", nil)
	if r.status != http.StatusOK {
		t.Fatalf("GET /v1/pools = %s", r)
	}
	list := decode[listPoolsResponse](t, r)
	if len(list.Items) != 2 || list.Items[0].Name != "cold" || list.Items[1].Name != "warm" {
		t.Errorf("list = %+v", list)
	}

	// Update the capacity; the rest of the pool is left alone.
	r = e.do("PUT", "/v1/pools/warm", `{"capacitySpec":{"bufferMax":8,"bufferMin":4,"poolMax":16,"poolMin":2}}`)
	if r.status != http.StatusOK {
		t.Fatalf("PUT /v1/pools/warm = %s", r)
	}
	if got := decode[poolResponse](t, r); got.CapacitySpec != (poolCapacity{BufferMax: 8, BufferMin: 4, PoolMax: 16, PoolMin: 2}) || got.Status.Revision != "rev1" {
		t.Errorf("PUT = %+v", got)
	}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "warm"}, &obj); err != nil {
		t.Fatal(err)
	}
	if obj.Spec.CapacitySpec != (sandboxv1alpha1.CapacitySpec{BufferMax: 8, BufferMin: 4, PoolMax: 16, PoolMin: 2}) || obj.Spec.Template.Labels["app"] != "sandbox" {
		t.Errorf("stored after PUT: %+v", obj.Spec)
	}
	wantError(t, "PUT missing", e.do("PUT", "/v1/pools/missing", `{"capacitySpec":{"bufferMax":1,"bufferMin":1,"poolMax":1,"poolMin":1}}`),
		http.StatusNotFound, apierror.CodePoolNotFound, `pool "missing" not found`)
	wantError(t, "PUT invalid", e.do("PUT", "/v1/pools/warm", `{"capacitySpec":{"bufferMax":1,"bufferMin":2,"poolMax":1,"poolMin":1}}`),
		http.StatusBadRequest, apierror.CodeInvalidRequest, "capacitySpec.bufferMin")
	wantError(t, "PUT without capacity", e.do("PUT", "/v1/pools/warm", `{}`), http.StatusBadRequest, apierror.CodeInvalidRequest, "capacitySpec")
	wantError(t, "PUT without key", e.do("PUT", "/v1/pools/warm", `{"capacitySpec":{"bufferMax":0,"bufferMin":0,"poolMax":0,"poolMin":0}}`, sandbox.APIKeyHeader, "wrong"),
		http.StatusUnauthorized, apierror.CodeInvalidAPIKey)
	if r := e.do("GET", "/v1/pools/warm", nil); decode[poolResponse](t, r).CapacitySpec.BufferMax != 8 {
		t.Errorf("refused PUTs changed the pool: %s", r)
	}

	// Delete.
	if r := e.do("DELETE", "/v1/pools/warm", nil); r.status != http.StatusNoContent || len(r.body) != 0 {
		t.Fatalf("DELETE /v1/pools/warm = %s, want 204 and no body", r)
	}
	wantError(t, "GET deleted", e.do("GET", "/v1/pools/warm", nil), http.StatusNotFound, apierror.CodePoolNotFound)
	wantError(t, "DELETE deleted", e.do("DELETE", "/v1/pools/warm", nil), http.StatusNotFound, apierror.CodePoolNotFound)
	r = e.do("GET", "/v1/pools", nil)
	if list := decode[listPoolsResponse](t, r); len(list.Items) != 1 || list.Items[0].Name != "cold" {
		t.Errorf("list after delete = %s", r)
	}
	// The pools the server made are Pool resources like any other.
	var all sandboxv1alpha1.PoolList
	if err := env.Client.List(ctx, &all); err != nil {
		t.Fatal(err)
	}
	for _, p := range all.Items {
		if p.Namespace == ns && p.Name != "cold" {
			t.Errorf("unexpected Pool %s left in %s", p.Name, ns)
		}
	}

	// A cluster without the Pool kind: 501, saying what to install.
	noKinds, err := client.New(env.Config, client.Options{Scheme: env.Scheme, Mapper: meta.NewDefaultRESTMapper(nil)})
	if err != nil {
		t.Fatal(err)
	}
	e2 := newEnv(t, func(c *Config) {
		c.Runtime = &withPools{stubRuntime: c.Runtime.(*stubRuntime), Pools: kubepool.New(noKinds, ns)}
	})
	wantError(t, "GET without the CRD", e2.do("GET", "/v1/pools", nil), http.StatusNotImplemented,
		apierror.CodePoolNotSupported, "install the OpenSandbox CRDs")

	// A caller the apiserver's RBAC refuses: 500 POOL_API_ERROR with the
	// apiserver's message.
	nobodyCfg := rest.CopyConfig(env.Config)
	nobodyCfg.Impersonate = rest.ImpersonationConfig{UserName: "nobody"}
	nobody, err := client.New(nobodyCfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	e3 := newEnv(t, func(c *Config) {
		c.Runtime = &withPools{stubRuntime: c.Runtime.(*stubRuntime), Pools: kubepool.New(nobody, ns)}
	})
	wantError(t, "POST as nobody", e3.do("POST", "/v1/pools", poolBody("forbidden", 1, 0, 1, 0)), http.StatusInternalServerError,
		apierror.CodePoolAPIError, "forbidden", `"nobody"`)
}
