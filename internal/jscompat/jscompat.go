// Package jscompat runs the official OpenSandbox JavaScript SDK's
// compatibility script (test/compat/js/compat.mjs) against a server, for
// the e2e suites of both runtimes.
package jscompat

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/openapitest"
)

// Dir is the script's directory in the repository.
func Dir() string { return openapitest.RepoPath("test/compat/js") }

// Node returns the node binary after installing the script's pinned
// dependencies (npm ci, when node_modules is missing or older than
// package-lock.json). It fails the test, not skips it, when Node.js >=
// 20.18.1 or npm is missing: the suites are meant to run everything.
func Node(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node not found on PATH: the JS SDK compatibility test needs Node.js >= 20 and npm (%v)", err)
	}
	if _, err := exec.LookPath("npm"); err != nil {
		t.Fatalf("npm not found on PATH: the JS SDK compatibility test needs Node.js >= 20 and npm (%v)", err)
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		t.Fatalf("node --version: %v", err)
	}
	// The SDK needs Node >= 20, its undici dependency >= 20.18.1.
	if v := strings.TrimSpace(string(out)); !VersionAtLeast(strings.TrimPrefix(v, "v"), 20, 18, 1) {
		t.Fatalf("node %s is too old: @alibaba-group/opensandbox (with undici 7) needs Node.js >= 20.18.1", v)
	}
	npmInstall(t, Dir())
	return node
}

// VersionAtLeast compares a "major.minor.patch" version with a minimum.
func VersionAtLeast(v string, want ...int) bool {
	parts := strings.SplitN(v, ".", len(want))
	for i, w := range want {
		n := 0
		if i < len(parts) {
			var err error
			// "1-rc.1" and the like: only the leading digits count.
			digits := parts[i]
			if j := strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }); j >= 0 {
				digits = digits[:j]
			}
			if n, err = strconv.Atoi(digits); err != nil {
				return false
			}
		}
		if n != w {
			return n > w
		}
	}
	return true
}

// npmInstall runs `npm ci` in dir when node_modules is missing or older than
// package-lock.json (npm rewrites node_modules/.package-lock.json on every
// install, so that file's time is the install's time).
func npmInstall(t *testing.T, dir string) {
	t.Helper()
	lock, err := os.Stat(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		t.Fatalf("package-lock.json: %v", err)
	}
	installed, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json"))
	if err == nil && !installed.ModTime().Before(lock.ModTime()) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
	}
}

// Run runs compat.mjs with node against the server at domain (host:port,
// plain HTTP) with apiKey, image and the run id put on every sandbox;
// extraEnv adds variables (COMPAT_*). It returns the script's output.
func Run(node, domain, apiKey, image, runID string, extraEnv ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "compat.mjs")
	cmd.Dir = Dir()
	cmd.Env = append(os.Environ(),
		"OPEN_SANDBOX_DOMAIN="+domain,
		"OPEN_SANDBOX_API_KEY="+apiKey,
		"OPEN_SANDBOX_PROTOCOL=http",
		"COMPAT_IMAGE="+image,
		"COMPAT_RUN_ID="+runID,
	)
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.WaitDelay = 10 * time.Second
	return cmd.CombinedOutput()
}
