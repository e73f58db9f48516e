//go:build !linux

package isolation

import (
	"context"
	"errors"
	"os"
	"os/exec"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// BootstrapEnv is set by the runtime in sandboxes created with isolated
// execution enabled.
const BootstrapEnv = sandbox.IsolationBootstrapEnv

// RunHelper never claims a role off Linux.
func RunHelper(args []string) (int, bool) { return 0, false }

// Bootstrap has nothing to do off Linux.
func Bootstrap() error { return nil }

func (m *Manager) start(ctx context.Context, spec initSpec, ln *os.File) (*exec.Cmd, error) {
	return nil, errors.New("isolated execution needs Linux")
}

func (m *Manager) probe() sandbox.IsolatedCapabilities {
	return sandbox.IsolatedCapabilities{Message: "isolated execution needs Linux namespaces"}
}

func pseudoFS(p string) bool { return false }

func mkdirChecked(real string) error { return errors.New("isolated execution needs Linux") }
