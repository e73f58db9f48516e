package kubetest

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"k8s.io/client-go/discovery"

	"github.com/opensandbox-go/opensandbox/internal/openapitest"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

func TestNamespaceName(t *testing.T) {
	label := regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	for _, name := range []string{
		"TestCRDs",
		"TestCRDs/Refused/bufferMin_>_bufferMax",
		"Test" + strings.Repeat("X", 100),
		"///",
	} {
		got := namespaceName(name)
		if len(got) > 63 || !label.MatchString(got) {
			t.Errorf("namespaceName(%q) = %q, not a DNS label", name, got)
		}
	}
	if a, b := namespaceName("TestX"), namespaceName("TestX"); a == b {
		t.Errorf("namespaceName gave %q twice", a)
	}
}

// TestStart starts the apiserver and checks that our kinds are served with
// their short names and that a namespace can be made.
func TestStart(t *testing.T) {
	env := Start(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	var list sandboxv1alpha1.BatchSandboxList
	if err := env.Client.List(ctx, &list); err != nil {
		t.Fatalf("listing BatchSandboxes in %s: %v", ns, err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	resources, err := dc.ServerResourcesForGroupVersion(sandboxv1alpha1.GroupVersion.String())
	if err != nil {
		t.Fatalf("discovery of %s: %v", sandboxv1alpha1.GroupVersion, err)
	}
	served := map[string]string{}
	for _, r := range resources.APIResources {
		served[r.Name] = r.Kind + " " + strings.Join(r.ShortNames, ",")
	}
	for resource, want := range map[string]string{
		"batchsandboxes":   "BatchSandbox bsbx",
		"pools":            "Pool ",
		"sandboxsnapshots": "SandboxSnapshot sbxsnap",
	} {
		if served[resource] != want {
			t.Errorf("resource %s: served as %q, want kind and short names %q", resource, served[resource], want)
		}
	}
	if got, want := env.CRDDir, openapitest.RepoPath("deploy/crds"); got != want {
		t.Errorf("CRDDir = %s, want %s", got, want)
	}
}
