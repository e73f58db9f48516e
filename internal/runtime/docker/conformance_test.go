package docker

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/internal/runtime/runtimetest"
)

// TestConformance holds the Docker driver to the suite every runtime must
// pass, on the real engine.
func TestConformance(t *testing.T) {
	needEngine(t)
	runtimetest.Run(t, runtimetest.Harness{
		// With warm network holders running, as the server runs it:
		// creates take a holder when one is ready.
		New: func(t *testing.T) runtime.Runtime {
			r := newTestRuntime(t, nil)
			runBackground(t, r)
			waitWarm(t, r, DefaultWarmNetworks)
			return r
		},
		Image:   env.image,
		NewID:   newID,
		Timeout: 60 * time.Second,
		// What the engine may hold for a sandbox: its container, its
		// egress sidecar, its volumes and its network, all labelled with
		// its id, and its network holder, named after it.
		Leftovers: func(t *testing.T, id string) []string {
			f := "label=" + labelID + "=" + id
			var left []string
			if containerExists(holderName(id)) {
				left = append(left, "network holder "+holderName(id))
			}
			for _, kind := range [][]string{{"ps", "-aq"}, {"volume", "ls", "-q"}, {"network", "ls", "-q"}} {
				out, err := exec.Command("docker", append(kind, "--filter", f)...).Output()
				if err != nil {
					t.Fatalf("docker %v: %v", kind, err)
				}
				for _, x := range strings.Fields(string(out)) {
					left = append(left, kind[0]+" "+x)
				}
			}
			return left
		},
	})
}
