package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	osexec "os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/openapitest"
)

const baseImageRef = "opensandbox/base:latest"

// runBuildScript runs images/build.sh with args and returns its output and
// how long it took. The first build here takes about a minute.
func runBuildScript(t *testing.T, args ...string) (string, time.Duration) {
	t.Helper()
	if os.Getenv("OSB_E2E") == "" {
		t.Skip("end-to-end test: run with `make e2e` (OSB_E2E=1)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	argv := append([]string{openapitest.RepoPath("images/build.sh")}, args...)
	start := time.Now()
	out, err := osexec.CommandContext(ctx, "bash", argv...).CombinedOutput()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("images/build.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), took
}

// inImage runs script with bash in a throwaway container of image,
// without network, and returns its standard output.
func inImage(t *testing.T, image, user, script string) string {
	t.Helper()
	args := []string{"run", "--rm", "--network", "none", "--label", testLabel}
	if user != "" {
		args = append(args, "--user", user)
	}
	args = append(args, image, "bash", "-euc", script)
	var stdout, stderr bytes.Buffer
	cmd := osexec.Command("docker", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("docker run %s bash -c %q: %v\nstdout: %s\nstderr: %s", image, script, err, stdout.String(), stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

// inBaseImage is inImage on the base image.
func inBaseImage(t *testing.T, user, script string) string {
	t.Helper()
	return inImage(t, baseImageRef, user, script)
}

func TestImageBase(t *testing.T) {
	runBuildScript(t, "base")

	hash, _ := runBuildScript(t, "--hash", "base")
	hash = strings.TrimSpace(hash)
	var img struct {
		ID     string `json:"Id"`
		Config struct {
			Env        []string
			Cmd        []string
			WorkingDir string
			Labels     map[string]string
		}
	}
	out, err := osexec.Command("docker", "image", "inspect", "--format", "{{json .}}", baseImageRef).Output()
	if err != nil {
		t.Fatalf("docker image inspect %s: %v", baseImageRef, err)
	}
	if err := json.Unmarshal(out, &img); err != nil {
		t.Fatalf("decoding docker image inspect: %v", err)
	}
	c := img.Config
	if c.Labels["io.opensandbox.image"] != "base" || c.Labels["io.opensandbox.recipe"] != hash {
		t.Errorf("labels = %v, want io.opensandbox.image=base and io.opensandbox.recipe=%s", c.Labels, hash)
	}
	if !slices.Equal(c.Cmd, []string{"/bin/bash"}) || c.WorkingDir != "/" || !slices.Contains(c.Env, "LANG=C.UTF-8") {
		t.Errorf("config: Cmd %q, WorkingDir %q, Env %q; want [/bin/bash], / and LANG=C.UTF-8", c.Cmd, c.WorkingDir, c.Env)
	}
	// The hash tag and upstream's version tags are the latest image.
	for _, tag := range []string{hash, "v1.0.1", "v1.0.2", "v1.1.0"} {
		id, err := osexec.Command("docker", "image", "inspect", "--format", "{{.Id}}", "opensandbox/base:"+tag).Output()
		if err != nil || strings.TrimSpace(string(id)) != img.ID {
			t.Errorf("opensandbox/base:%s = %q (%v), want the same image as latest (%s)", tag, id, err, img.ID)
		}
	}

	for _, tt := range []struct {
		name, user, script, want string
	}{
		{"bash", "", `echo "$BASH_VERSION" | cut -d. -f1`, "5"},
		{"python3", "", `python3 -c 'print(1+1)'`, "2"},
		{"curl", "", `curl --version | head -n1 | cut -d' ' -f1`, "curl"},
		{"ca certificates", "", `command -v update-ca-certificates >/dev/null && test -s /etc/ssl/certs/ca-certificates.crt && echo ok`, "ok"},
		{"python trusts the CAs", "", `python3 -c 'import ssl; print(ssl.create_default_context().cert_store_stats()["x509_ca"] > 100)'`, "True"},
		{"tools", "", `for c in ps ip less find grep sed tar gzip; do command -v $c >/dev/null || echo "no $c"; done; echo done`, "done"},
		{"user sandbox", "", `id -u sandbox; id -g sandbox; getent passwd sandbox | cut -d: -f6-7`, "1000\n1000\n/home/sandbox:/bin/bash"},
		{"sandbox owns its home", "sandbox", `cd && touch f && pwd && id -un`, "/home/sandbox\nsandbox"},
		{"tmp is sticky and world-writable", "", `stat -c %a /tmp /var/tmp`, "1777\n1777"},
		{"locale and working directory", "", `echo "$LANG"; pwd`, "C.UTF-8\n/"},
		{"no apt lists or caches", "", `find /var/lib/apt/lists /var/cache/apt -type f ! -name lock | wc -l`, "0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := inBaseImage(t, tt.user, tt.script); got != tt.want {
				t.Errorf("%s: got %q, want %q", tt.script, got, tt.want)
			}
		})
	}
}

func TestImageBaseUpToDate(t *testing.T) {
	runBuildScript(t, "base")
	out, took := runBuildScript(t, "base")
	label, err := osexec.Command("docker", "image", "inspect", "--format",
		`{{index .Config.Labels "io.opensandbox.recipe"}}`, baseImageRef).Output()
	if err != nil {
		t.Fatalf("docker image inspect %s: %v", baseImageRef, err)
	}
	want := "opensandbox/base:latest is up to date (recipe " + strings.TrimSpace(string(label)) + ")"
	if strings.TrimSpace(out) != want {
		t.Errorf("second build said %q, want %q", out, want)
	}
	if took > 5*time.Second {
		t.Errorf("second build took %v, want < 5s (no rebuild)", took)
	}
	t.Logf("up-to-date check took %v", took)
}
