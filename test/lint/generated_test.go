package lint

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedCRDsUpToDate regenerates the custom resources' deep-copy code,
// CRD manifests and the controller's ClusterRole into a temporary directory
// and fails when the committed ones differ: change the types or the
// +kubebuilder:rbac markers, then run `make generate`.
func TestGeneratedCRDsUpToDate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs controller-gen")
	}
	root := repoRoot(t)
	tmp := t.TempDir()
	objDir, crdDir, rbacDir := filepath.Join(tmp, "object"), filepath.Join(tmp, "crds"), filepath.Join(tmp, "rbac")
	cmd := exec.Command("bash", "scripts/generate-crds.sh", objDir, crdDir, rbacDir)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/generate-crds.sh: %v\n%s", err, out)
	}

	const deepcopy = "zz_generated.deepcopy.go"
	compareFile(t, filepath.Join(objDir, deepcopy), filepath.Join(root, "pkg/apis/sandbox/v1alpha1", deepcopy))

	compareDir(t, crdDir, root, "deploy/crds")
	compareFile(t, filepath.Join(rbacDir, "role.yaml"), filepath.Join(root, "deploy/controller/rbac/role.yaml"))
}

// compareDir compares every generated file in fresh with rel (under root),
// and reports committed files that are no longer generated.
func compareDir(t *testing.T, fresh, root, rel string) {
	t.Helper()
	generated := listDir(t, fresh)
	committed := listDir(t, filepath.Join(root, rel))
	for name := range generated {
		if !committed[name] {
			t.Errorf("%s/%s is missing: run make generate", rel, name)
			continue
		}
		compareFile(t, filepath.Join(fresh, name), filepath.Join(root, rel, name))
	}
	for name := range committed {
		if !generated[name] {
			t.Errorf("%s/%s is not generated from pkg/apis (a CRD that no longer exists?): remove it", rel, name)
		}
	}
}

func compareFile(t *testing.T, fresh, committed string) {
	t.Helper()
	want, err := os.ReadFile(fresh)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(committed)
	if err != nil {
		t.Errorf("%v: run make generate", err)
		return
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale: run make generate (regenerated %d bytes, committed %d)", committed, len(want), len(got))
	}
}

func listDir(t *testing.T, dir string) map[string]bool {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := make(map[string]bool, len(entries))
	for _, e := range entries {
		names[e.Name()] = true
	}
	return names
}
