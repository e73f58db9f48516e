//go:build linux

package isolation

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/testenv"
)

// startExecdAs starts the helper execd as uid/gid 65534 with the bootstrap
// variable, as the runtime starts a sandbox whose image runs as a
// non-root user: the container's bounding set holds CAP_SYS_ADMIN, but
// execd holds no capability with which to drop it. wrap runs before it.
// It returns whether execd came up (and is killed again), and its log.
func startExecdAs(t *testing.T, wrap ...string) (bool, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.NeedRoot(t, "start a non-root process with a full bounding set")
	}
	if err := os.Chmod(filepath.Dir(helperExe), 0o755); err != nil {
		t.Fatal(err)
	}
	args := append(append([]string(nil), wrap...), helperExe, "--addr", "127.0.0.1:0")
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = []string{BootstrapEnv + "=1", "PATH=/usr/bin:/bin", "TMPDIR=" + t.TempDir()}
	os.Chmod(cmd.Env[2][len("TMPDIR="):], 0o777)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "execd listening") {
			cmd.Process.Kill()
			cmd.Wait()
			return true, log.String()
		}
	}
	cmd.Wait()
	return false, log.String()
}

// TestBootstrapKeepsNoSysAdminInReach: when execd cannot drop
// CAP_SYS_ADMIN from the bounding set (it does not start as root), every
// process of the sandbox keeps it there, and without no_new_privs a
// setuid-root binary would hand it out for real: more than a sandbox
// without isolated execution ever gets. execd then refuses to start.
// With no_new_privs (the default hardening) nothing can reach it and
// execd starts.
func TestBootstrapKeepsNoSysAdminInReach(t *testing.T) {
	if up, log := startExecdAs(t); up || !strings.Contains(log, "bounding set") {
		t.Errorf("a non-root execd with CAP_SYS_ADMIN in reach: up=%v, log:\n%s", up, log)
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		testenv.Missing(t, "no setpriv to set no_new_privs")
	}
	if up, log := startExecdAs(t, "setpriv", "--no-new-privs"); !up {
		t.Errorf("a non-root execd under no_new_privs did not start:\n%s", log)
	}
}
