package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/openapitest"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// testLabel marks every container the tests start, so that leftovers of
// an interrupted run can be found and removed.
const testLabel = "io.opensandbox.test=e2e"

func docker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := osexec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// minimalImage builds (once per recipe) an image holding nothing but a
// static busybox: no /tmp, no /etc/passwd, no bash. execd must work in it.
func minimalImage(t *testing.T) string {
	t.Helper()
	if _, err := osexec.LookPath("docker"); err != nil {
		t.Fatal("docker CLI not found: run `make test`, which installs the engine")
	}
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatalf("static busybox needed for the minimal image (apt-get install busybox-static): %v", err)
	}
	applets := []string{"sh", "sleep", "echo", "cat", "ls", "id", "env", "mkdir", "rm"}
	sum := sha256.Sum256(append(bb, strings.Join(applets, ",")...))
	tag := "opensandbox-test/minimal:" + hex.EncodeToString(sum[:6])
	if out, err := osexec.Command("docker", "image", "inspect", tag).CombinedOutput(); err == nil {
		return tag
	} else if !strings.Contains(string(out), "No such image") {
		t.Fatalf("docker image inspect: %v\n%s", err, out)
	}
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "bin"), 0o755)
	if err := os.WriteFile(filepath.Join(root, "bin", "busybox"), bb, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, a := range applets {
		os.Symlink("busybox", filepath.Join(root, "bin", a))
	}
	cmd := osexec.Command("sh", "-c", fmt.Sprintf("tar -C %s -c . | docker import --change 'ENV PATH=/bin' - %s", root, tag))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker import: %v\n%s", err, out)
	}
	return tag
}

// runInContainer starts execd, bind-mounted read-only from the build,
// as the supervisor of a busybox entrypoint in the minimal image.
func runInContainer(t *testing.T, extra ...string) *execdProc {
	t.Helper()
	execd := binPath(t, "execd")
	image := minimalImage(t)
	args := []string{"run", "-d", "--label", testLabel, "-p", "127.0.0.1::44772",
		"-v", execd + ":/opt/opensandbox/execd:ro"}
	args = append(args, extra...)
	args = append(args, "--entrypoint", "/opt/opensandbox/execd", image, "--", "sleep", "100000")
	id := docker(t, args...)
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := osexec.Command("docker", "logs", id).CombinedOutput()
			t.Logf("container log:\n%s", out)
		}
		osexec.Command("docker", "rm", "-f", id).Run()
	})
	hostPort := docker(t, "port", id, "44772/tcp")
	hostPort = strings.Split(hostPort, "\n")[0]
	p := &execdProc{base: "http://" + hostPort, exited: make(chan struct{})}
	spec := openapitest.Load(t, "api/execd.yaml")
	p.client = &http.Client{Transport: spec.Transport(t, &tokenTransport{p: p})}
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		resp, err := p.do(ctx, http.MethodGet, "/ping", "", nil)
		cancel()
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("execd in the container never answered /ping: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestExecdInMinimalImage(t *testing.T) {
	p := runInContainer(t)
	ex := p.stream(t, "/command", sandbox.RunCommandRequest{Command: "echo hi; id -u; ls /"})
	if len(ex.stdout) < 2 || ex.stdout[0] != "hi" || ex.stdout[1] != "0" || ex.exit != 0 {
		t.Errorf("command in minimal image: %q exit %d", ex.stdout, ex.exit)
	}
	// Background commands need scratch space; the image has no /tmp.
	bg := p.stream(t, "/command", sandbox.RunCommandRequest{Command: "echo from-bg", Background: true})
	id := bg.events[0].Text
	poll(t, "background output", func() bool {
		return string(p.call(t, "GET", "/command/"+id+"/logs", nil, 200, nil)) == "from-bg\n"
	})
	var cs sandbox.CreateSessionResponse
	p.call(t, "POST", "/session", nil, 200, &cs)
	p.stream(t, "/session/"+cs.SessionID+"/run", sandbox.RunInSessionRequest{Command: "X=kept; cd /bin"})
	if ex := p.stream(t, "/session/"+cs.SessionID+"/run", sandbox.RunInSessionRequest{Command: "echo $X $(pwd)"}); joined(ex.stdout) != "kept /bin" {
		t.Errorf("session in minimal image (sh, not bash): %q", ex.stdout)
	}
	var m sandbox.Metrics
	p.call(t, "GET", "/metrics", nil, 200, &m)
	if m.CPUCount <= 0 || m.MemTotalMiB <= 0 {
		t.Errorf("metrics in container = %+v", m)
	}
	var infos map[string]sandbox.FileInfo
	p.call(t, "GET", "/files/info?path=/bin/busybox", nil, 200, &infos)
	if infos["/bin/busybox"].Size == 0 || infos["/bin/busybox"].Owner != "0" {
		t.Errorf("info in an image without /etc/passwd = %+v, want numeric owner 0", infos["/bin/busybox"])
	}
}

func TestExecdInReadOnlyImageAsNobody(t *testing.T) {
	p := runInContainer(t, "--user", "65534:65534", "--read-only")
	ex := p.stream(t, "/command", sandbox.RunCommandRequest{Command: "id -u; echo ok"})
	if joined(ex.stdout) != "65534|ok" {
		t.Errorf("non-root read-only container: %q", ex.stdout)
	}
	// Scratch space falls back to /dev/shm, which Docker mounts writable.
	bg := p.stream(t, "/command", sandbox.RunCommandRequest{Command: "echo bg-ok", Background: true})
	poll(t, "background output", func() bool {
		return string(p.call(t, "GET", "/command/"+bg.events[0].Text+"/logs", nil, 200, nil)) == "bg-ok\n"
	})
	var er sandbox.ErrorResponse
	p.call(t, "POST", "/directories", map[string]sandbox.Permission{"/nope": {Mode: 755}}, 403, &er)
	if er.Code != "PERMISSION_DENIED" {
		t.Errorf("mkdir on a read-only root = %+v", er)
	}
}
