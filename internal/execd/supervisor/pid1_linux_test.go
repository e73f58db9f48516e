package supervisor

import (
	"errors"
	"os"
	"os/exec"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/testenv"
)

// TestPID1InNewPIDNamespace runs the supervisor as PID 1 of a new PID
// namespace (with its own /proc), where it is the reaper of last resort: the
// entrypoint leaves an orphan that exits and exits 7 only once that orphan
// has been reaped, and the supervisor exits 92 if anything is left over.
func TestPID1InNewPIDNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.NeedRoot(t, "create a PID and mount namespace")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		testenv.Missing(t, "unshare (util-linux) not installed")
	}
	if out, err := exec.Command(unshare, "--pid", "--fork", "--mount-proc", "true").CombinedOutput(); err != nil {
		testenv.Missing(t, "cannot create a PID namespace here: %v: %s", err, out)
	}
	dir := t.TempDir()
	cmd := exec.Command(unshare, "--pid", "--fork", "--mount-proc", self(), "-test.run=^$")
	cmd.Env = helperEnv(dir, "pid1-supervisor")
	out, err := cmd.CombinedOutput()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run supervisor in a PID namespace: %v\n%s", err, out)
	}
	if code != 7 {
		t.Fatalf("supervisor as PID 1 exited %d; want 7 (the entrypoint's code)\n%s", code, out)
	}
	if !exists(dir, "server-stopped") {
		t.Errorf("server was not stopped gracefully\n%s", out)
	}
}
