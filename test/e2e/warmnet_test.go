package e2e

import (
	"fmt"
	osexec "os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// holdersOf lists the network holders of instance inst: idle ones and
// taken ones, by name.
func holdersOf(t *testing.T, inst string) (idle, taken []string) {
	t.Helper()
	out, err := osexec.Command("docker", "ps", "-a", "--filter", "label=opensandbox.io/netns-holder=true",
		"--filter", "label=opensandbox.io/instance="+inst, "--format", "{{.Names}} {{.State}}").Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, state, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if strings.HasPrefix(name, "sandbox-netns-idle-") && state == "running" {
			idle = append(idle, name)
		} else if !strings.HasPrefix(name, "sandbox-netns-idle-") {
			taken = append(taken, name)
		}
	}
	return idle, taken
}

// TestWarmNetworksServer: the server keeps docker.warm_networks holders
// ready (2 by default); a sandbox joins one and works through the SDK;
// deleting it removes its holder; a server killed with SIGKILL leaves its
// idle holders, which the next start adopts instead of starting more; a
// server stopped with SIGTERM removes them.
func TestWarmNetworksServer(t *testing.T) {
	inst := fmt.Sprintf("e2e-warm-%d", time.Now().UnixNano())
	t.Cleanup(func() {
		osexec.Command("docker", "volume", "rm", "-f", "opensandbox-instance-"+inst).Run()
		if ids, _ := osexec.Command("docker", "ps", "-aq", "--filter", "label=opensandbox.io/instance="+inst).Output(); len(ids) > 0 {
			osexec.Command("docker", append([]string{"rm", "-f"}, strings.Fields(string(ids))...)...).Run()
		}
	})
	s := startServer(t, serverOpts{serverTOML: fmt.Sprintf("instance_id = %q\n", inst)})
	var ready []string
	pollUntil(t, "two warm network holders", 60*time.Second, func() bool {
		ready, _ = holdersOf(t, inst)
		return len(ready) == 2
	})
	c := sdkClient(t, s, false)
	// Not sdkCreate: its cleanup would call a server this test stops.
	sb, err := c.Create(sdkCtx(t), sandbox.CreateOptions{Image: ensureBaseImage(t), Resources: map[string]string{"cpu": "1", "memory": "512Mi"}})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	mode, err := osexec.Command("docker", "inspect", "-f", "{{.HostConfig.NetworkMode}}", sandboxContainer(t, sb.ID())).Output()
	if err != nil {
		t.Fatalf("inspect the sandbox: %v", err)
	}
	owner, ok := strings.CutPrefix(strings.TrimSpace(string(mode)), "container:")
	if !ok {
		t.Fatalf("sandbox network mode %q; want a warm holder's namespace", mode)
	}
	name, _ := osexec.Command("docker", "inspect", "-f", "{{.Name}}", owner).Output()
	if !strings.HasPrefix(strings.TrimSpace(string(name)), "/sandbox-netns-") || strings.Contains(string(name), sb.ID()) {
		t.Errorf("the sandbox's network holder is named %q; want sandbox-netns-<hash>", name)
	}
	if ex := runIn(t, sb, "echo warm"); ex.ExitCode != 0 || ex.Text() != "warm" {
		t.Fatalf("command in a sandbox on a warm network: exit %d %q", ex.ExitCode, ex.Text())
	}
	if err := sb.Kill(sdkCtx(t)); err != nil {
		t.Fatalf("delete: %v", err)
	}
	pollUntil(t, "the deleted sandbox's holder to go, and the pool to refill", 60*time.Second, func() bool {
		idle, taken := holdersOf(t, inst)
		return len(taken) == 0 && len(idle) == 2
	})

	before, _ := holdersOf(t, inst)
	s.restart() // SIGKILL, then start again
	pollUntil(t, "two warm network holders after the restart", 60*time.Second, func() bool {
		ready, _ = holdersOf(t, inst)
		return len(ready) == 2
	})
	if strings.Join(ready, ",") != strings.Join(before, ",") {
		t.Errorf("holders after a SIGKILL restart %v; want the ones left behind adopted, %v", ready, before)
	}

	s.stop(syscall.SIGTERM)
	if idle, taken := holdersOf(t, inst); len(idle)+len(taken) != 0 {
		t.Errorf("holders left by a server stopped with SIGTERM: idle %v, taken %v", idle, taken)
	}
}
