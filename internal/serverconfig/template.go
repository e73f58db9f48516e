package serverconfig

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"

	"github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

// LoadBatchSandboxTemplate reads a kubernetes.batchsandbox_template_file:
// one BatchSandbox in YAML (or JSON) whose metadata and spec every
// sandbox's resource starts from. apiVersion and kind may be left out;
// when given they must be sandbox.opensandbox.io/v1alpha1 and BatchSandbox.
// Unknown fields are refused, and so are the fields the server sets for
// each sandbox (metadata.name, metadata.namespace, spec.poolRef,
// spec.expireTime) and replicas other than 1. Load checks the file with
// it; the runtime reads it with it too.
func LoadBatchSandboxTemplate(path string) (*v1alpha1.BatchSandbox, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("the file is empty")
	}
	var bs v1alpha1.BatchSandbox
	if err := yaml.UnmarshalStrict(data, &bs); err != nil {
		return nil, fmt.Errorf("not a BatchSandbox: %w", err)
	}
	want := v1alpha1.GroupVersion.String()
	if v := bs.APIVersion; v != "" && v != want {
		return nil, fmt.Errorf("apiVersion %q: want %q or none", v, want)
	}
	if k := bs.Kind; k != "" && k != "BatchSandbox" {
		return nil, fmt.Errorf("kind %q: want \"BatchSandbox\" or none", k)
	}
	perSandbox := []struct {
		field string
		set   bool
	}{
		{"metadata.name", bs.Name != "" || bs.GenerateName != ""},
		{"metadata.namespace", bs.Namespace != ""},
		{"spec.poolRef", bs.Spec.PoolRef != ""},
		{"spec.expireTime", bs.Spec.ExpireTime != nil},
	}
	for _, f := range perSandbox {
		if f.set {
			return nil, fmt.Errorf("%s is set by the server for each sandbox: remove it from the template", f.field)
		}
	}
	if r := bs.Spec.Replicas; r != nil && *r != 1 {
		return nil, fmt.Errorf("spec.replicas = %d: a sandbox is one pod; want 1 or none", *r)
	}
	return &bs, nil
}
