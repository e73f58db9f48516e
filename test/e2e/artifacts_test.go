package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/openapitest"
)

// saveArtifact keeps data as the file name (slashes make subdirectories)
// under $OSB_ARTIFACTS, or under bin/artifacts in the repository when that
// is unset, for a person or CI to look at after the run (screenshots,
// logs). It returns the path; failing to write fails the test.
func saveArtifact(t *testing.T, name string, data []byte) string {
	t.Helper()
	dir := os.Getenv("OSB_ARTIFACTS")
	if dir == "" {
		dir = openapitest.RepoPath("bin/artifacts")
	}
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Errorf("saving artifact %s: %v", name, err)
		return p
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Errorf("saving artifact %s: %v", name, err)
		return p
	}
	t.Logf("artifact: %s (%d bytes)", p, len(data))
	return p
}
