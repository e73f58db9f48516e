package kubernetes

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

func TestLoadTemplate(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte(`apiVersion: sandbox.opensandbox.io/v1alpha1
kind: BatchSandbox
metadata: {name: template}
spec:
  template:
    metadata: {labels: {site: a}}
    spec:
      tolerations: [{key: sandbox, operator: Exists}]
      containers: [{name: main, image: ignored}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	tmpl, err := loadTemplate(good)
	if err != nil {
		t.Fatal(err)
	}
	if tmpl.Labels["site"] != "a" || len(tmpl.Spec.Tolerations) != 1 || tmpl.Spec.Containers[0].Name != "main" {
		t.Errorf("template %+v", tmpl)
	}
	none := filepath.Join(dir, "none.yaml")
	if err := os.WriteFile(none, []byte("kind: BatchSandbox\nspec: {replicas: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{none, filepath.Join(dir, "missing.yaml")} {
		if _, err := loadTemplate(p); !errors.Is(err, runtime.ErrInvalid) {
			t.Errorf("loadTemplate(%s): %v, want ErrInvalid", filepath.Base(p), err)
		}
	}
}
