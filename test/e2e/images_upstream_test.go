package e2e

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// The tests here use our images the way upstream's documentation does:
// under upstream's image names and entrypoint, with the runtime version
// variables of upstream's code-interpreter image, and with an image that
// is not there.

// upstreamCodeImage is the image upstream's quick start creates.
const upstreamCodeImage = "opensandbox/code-interpreter:v1.0.2"

// imageLabel returns one label of a local image.
func imageLabel(t *testing.T, ref, key string) string {
	t.Helper()
	return docker(t, "image", "inspect", "--format", `{{index .Config.Labels "`+key+`"}}`, ref)
}

// TestUpstreamQuickstart is upstream's quick start through the server:
// the code-interpreter image by upstream's name and entrypoint, with
// version variables it can satisfy, then a command, a file written and
// read back, and Python code whose last line is an expression.
func TestUpstreamQuickstart(t *testing.T) {
	t.Parallel()
	ensureCodeInterpreterImage(t)
	s := startServer(t, serverOpts{})
	c := sdkClient(t, s, false)
	python := imageLabel(t, upstreamCodeImage, "io.opensandbox.versions.python")
	if python == "" {
		t.Fatalf("%s has no io.opensandbox.versions.python label", upstreamCodeImage)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ci, err := c.CreateCodeInterpreter(ctx, sandbox.CreateOptions{
		Image:      upstreamCodeImage,
		Entrypoint: []string{"/opt/opensandbox/code-interpreter.sh"},
		// 3.11 for 3.11.2 etc.: a major.minor, as upstream's examples give it.
		Env: map[string]string{
			"PYTHON_VERSION": python[:strings.LastIndex(python, ".")],
			"JAVA_VERSION":   "17",
			"NODE_VERSION":   "18",
			"GO_VERSION":     "1.19",
		},
		Resources:    map[string]string{"cpu": "1", "memory": "1Gi"},
		ReadyTimeout: time.Minute,
	})
	if err != nil {
		t.Fatalf("create %s with upstream's entrypoint: %v", upstreamCodeImage, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := ci.Kill(ctx); err != nil && !sandbox.IsNotFound(err) {
			t.Errorf("Kill %s: %v", ci.ID(), err)
		}
	})

	// A command: python is Python 3, pip is there, and the working
	// directory is /workspace, which the sandbox user can write.
	ex, err := ci.Sandbox.Run(ctx, `echo "Hello OpenSandbox"; python --version; pip --version | cut -d' ' -f1; pwd`, sandbox.RunOptions{})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := "Hello OpenSandbox\nPython " + python + "\npip\n/workspace"
	if ex.ExitCode != 0 || ex.Text() != want {
		t.Errorf("command: exit %d, stdout %q (stderr %q), want %q", ex.ExitCode, ex.Text(), ex.Stderr, want)
	}
	uid := uint32(1000)
	ex, err = ci.Sandbox.Run(ctx, `touch /workspace/by-sandbox && id -un && stat -c %U /workspace/by-sandbox`, sandbox.RunOptions{UID: &uid, GID: &uid})
	if err != nil || ex.ExitCode != 0 || ex.Text() != "sandbox\nsandbox" {
		t.Errorf("as uid 1000 in /workspace: %+v, %v; want the sandbox user to create a file", ex, err)
	}

	// A file written and read back, where upstream's examples put them.
	if err := ci.WriteFile(ctx, "/workspace/hello.txt", []byte("Hello World"), sandbox.WriteOptions{Mode: 644}); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	if got, err := ci.ReadFile(ctx, "/workspace/hello.txt"); err != nil || string(got) != "Hello World" {
		t.Errorf("ReadFile = %q, %v; want %q", got, err, "Hello World")
	}

	// Python code whose last line is an expression: its value is the
	// execution's result, the print its stdout.
	code, err := ci.Run(ctx, "import sys\nprint(sys.version_info[:2])\nresult = 2 + 2\nresult", sandbox.CodeRunOptions{Language: "python"})
	if err != nil {
		t.Fatalf("code Run: %v", err)
	}
	major, minor, _ := strings.Cut(python, ".")
	minor, _, _ = strings.Cut(minor, ".")
	if code.Error != nil || len(code.Results) != 1 || code.Results[0].Text() != "4" || code.StdoutText() != "("+major+", "+minor+")\n" {
		t.Errorf("code: results %+v, stdout %q, error %+v; want one result \"4\" and stdout (%s, %s)", code.Results, code.StdoutText(), code.Error, major, minor)
	}
}

// TestUpstreamImageVersions asks for a runtime version the image does not
// have: the create fails, says which versions there are, and leaves no
// container behind. (The entrypoint refuses it as well; see
// TestImageCodeInterpreterVersionSelection.)
func TestUpstreamImageVersions(t *testing.T) {
	t.Parallel()
	ensureCodeInterpreterImage(t)
	s := startServer(t, serverOpts{})
	c := sdkClient(t, s, false)
	python := imageLabel(t, upstreamCodeImage, "io.opensandbox.versions.python")
	run := runID(t)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ci, err := c.CreateCodeInterpreter(ctx, sandbox.CreateOptions{
		Image:        upstreamCodeImage,
		Env:          map[string]string{"PYTHON_VERSION": "2.7"},
		Metadata:     map[string]string{"e2e-run": run},
		ReadyTimeout: time.Minute,
	})
	if err == nil {
		ci.Kill(context.Background())
		t.Fatal("create with PYTHON_VERSION=2.7 succeeded; the image has only Python " + python)
	}
	t.Logf("create with PYTHON_VERSION=2.7: %v", err)
	var ae *sandbox.APIError
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusBadRequest || ae.Code != "INVALID_REQUEST" {
		t.Fatalf("create with PYTHON_VERSION=2.7: %v, want a 400 INVALID_REQUEST", err)
	}
	for _, s := range []string{"PYTHON_VERSION=2.7", "python " + python, upstreamCodeImage} {
		if !strings.Contains(ae.Message, s) {
			t.Errorf("message %q does not say %q", ae.Message, s)
		}
	}
	if left := containersWithLabel(t, "opensandbox.io/metadata.e2e-run="+run); len(left) > 0 {
		t.Errorf("a refused create left containers %q", left)
	}
}

// TestCreateMissingImage creates a sandbox from an image that is neither
// here nor pullable (a registry on a closed loopback port): the error
// keeps its code, says so plainly and names the local opensandbox images.
func TestCreateMissingImage(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{})
	base := ensureBaseImage(t)
	const missing = "127.0.0.1:1/opensandbox/osb-e2e-missing:v9"
	var er sandbox.ErrorResponse
	s.api(t, "POST", "/v1/sandboxes", sandbox.CreateSandboxRequest{
		Image:          &sandbox.ImageSpec{URI: missing},
		Entrypoint:     []string{"tail", "-f", "/dev/null"},
		Timeout:        ptr[int64](60),
		ResourceLimits: map[string]string{"cpu": "1", "memory": "256Mi"},
	}, http.StatusBadRequest, &er)
	t.Logf("create from %s: %s %s", missing, er.Code, er.Message)
	if er.Code != "IMAGE_PULL_FAILED" {
		t.Errorf("code = %q, want IMAGE_PULL_FAILED", er.Code)
	}
	for _, s := range []string{
		"image " + missing + " is not present locally and could not be pulled (",
		"local opensandbox images: ",
		base,
	} {
		if !strings.Contains(er.Message, s) {
			t.Errorf("message %q does not say %q", er.Message, s)
		}
	}
	// build.sh's own bookkeeping tags are not offered.
	if hash := imageLabel(t, base, "io.opensandbox.recipe"); strings.Contains(er.Message, "opensandbox/base:"+hash) {
		t.Errorf("message %q lists the recipe-hash tag %s", er.Message, hash)
	}
}
