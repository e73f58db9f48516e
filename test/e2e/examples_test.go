package e2e

import (
	"os"
	osexec "os/exec"
	"strings"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/openapitest"
)

// TestExamplesRun runs the programs in examples/ against a real server, as
// a user would after reading docs/sdk-go.md.
func TestExamplesRun(t *testing.T) {
	s := startServer(t, serverOpts{})
	image := ensureBaseImage(t)
	for _, tt := range []struct {
		dir, want string
	}{
		{"./examples/quickstart", "hello"},
		{"./examples/pool", "warm sandbox"},
	} {
		t.Run(tt.dir, func(t *testing.T) {
			cmd := osexec.Command("go", "run", tt.dir)
			cmd.Dir = openapitest.RepoPath(".")
			cmd.Env = append(os.Environ(),
				"OPEN_SANDBOX_DOMAIN="+strings.TrimPrefix(s.base, "http://"),
				"OPEN_SANDBOX_API_KEY="+testAPIKey,
				"EXAMPLE_IMAGE="+image)
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), tt.want) {
				t.Errorf("go run %s: %v\n%s\nwant output containing %q", tt.dir, err, out, tt.want)
			}
		})
	}
}
