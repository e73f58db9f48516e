package docker

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/internal/testenv"
)

// testLabel marks everything the tests create; runLabel tells this run's
// objects from those of a concurrent run.
const (
	testLabelKey = "io.opensandbox.test"
	testLabelVal = "runtime"
	runLabelKey  = "io.opensandbox.test.run"
)

// env is what TestMain prepares for the engine tests.
var env struct {
	skip string // reason engine tests are skipped
	// engineMissing: skip is for lack of an engine (a failure in CI).
	engineMissing bool
	run           string // this run's id
	execd         string // static execd built for the tests
	image         string // busybox-only image
	cli           *client.Client
}

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	if testing.Short() {
		env.skip = "engine tests skipped with -short"
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err == nil {
		_, err = cli.Ping(ctx)
	}
	if err != nil {
		env.skip = fmt.Sprintf("Docker engine not reachable (run scripts/ensure-deps.sh): %v", err)
		env.engineMissing = true
		return m.Run()
	}
	env.cli = cli
	env.run = randomHex(4)
	dir, err := os.MkdirTemp("", "osb-docker-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	env.execd = filepath.Join(dir, "execd")
	build := exec.Command("go", "build", "-o", env.execd, "github.com/opensandbox-go/opensandbox/cmd/execd")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build execd: %v\n%s", err, out)
		return 1
	}
	if env.image, err = busyboxImage(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanupRun()
	return m.Run()
}

// busyboxImage imports an image holding only a static busybox and its
// applet links. It carries labels under our prefix, as an image built by
// anyone (or committed from a sandbox) may: sandboxes must not inherit
// them.
func busyboxImage(dir string) (string, error) {
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return "", fmt.Errorf("static busybox needed (apt-get install busybox-static): %w", err)
	}
	root := filepath.Join(dir, "rootfs")
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "busybox"), bb, 0o755); err != nil {
		return "", err
	}
	for _, a := range []string{"sh", "sleep", "echo", "cat", "ls", "mkdir", "rm", "touch", "httpd", "env", "id", "true", "false", "stat"} {
		if err := os.Symlink("busybox", filepath.Join(root, "bin", a)); err != nil {
			return "", err
		}
	}
	tag := "opensandbox-test/runtime-busybox:" + env.run
	script := fmt.Sprintf(`tar -C %s -c . | docker import --change 'ENV PATH=/bin' --change 'LABEL %s=%s %s=%s %s=intruder-volume %s=image' - %s`,
		root, testLabelKey, testLabelVal, runLabelKey, env.run, labelManagedVolumes, labelMetadataPrefix+"inherited", tag)
	if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
		return "", fmt.Errorf("docker import: %v\n%s", err, out)
	}
	return tag, nil
}

// cleanupRun removes whatever this run left (tests remove their own as
// they go; this catches failures half-way).
func cleanupRun() {
	f := "label=" + runLabelKey + "=" + env.run
	if ids := dockerOut("ps", "-aq", "--filter", f); ids != "" {
		exec.Command("docker", append([]string{"rm", "-f"}, strings.Fields(ids)...)...).Run()
	}
	if ids := dockerOut("volume", "ls", "-q", "--filter", f); ids != "" {
		exec.Command("docker", append([]string{"volume", "rm", "-f"}, strings.Fields(ids)...)...).Run()
	}
	if ids := dockerOut("images", "-q", "--filter", f); ids != "" {
		exec.Command("docker", append([]string{"rmi", "-f"}, strings.Fields(ids)...)...).Run()
	}
}

func dockerOut(args ...string) string {
	out, _ := exec.Command("docker", args...).Output()
	return strings.TrimSpace(string(out))
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// needEngine skips engine tests when TestMain could not reach one.
func needEngine(t *testing.T) {
	t.Helper()
	if env.skip != "" {
		if env.engineMissing {
			testenv.Missing(t, "%s", env.skip)
		}
		t.Skip(env.skip)
	}
}

// newTestRuntime returns a Runtime scoped to this run's labels.
func newTestRuntime(t *testing.T, mod func(*Options)) *Runtime {
	t.Helper()
	needEngine(t)
	o := Options{
		Client:       env.cli,
		ExecdPath:    env.execd,
		StartTimeout: 15 * time.Second,
		Labels:       map[string]string{testLabelKey: testLabelVal, runLabelKey: env.run},
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if testing.Verbose() {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if mod != nil {
		mod(&o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := New(ctx, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r
}

// newID returns a fresh sandbox id; the container it names is removed
// when the test ends, whatever happened.
func newID(t *testing.T) string {
	t.Helper()
	id := "rt" + randomHex(6)
	t.Cleanup(func() {
		if t.Failed() {
			if out, err := exec.Command("docker", "logs", "--tail", "30", containerName(id)).CombinedOutput(); err == nil && len(out) > 0 {
				t.Logf("logs of %s:\n%s", containerName(id), out)
			}
		}
		exec.Command("docker", "rm", "-f", "-v", containerName(id), holderName(id)).Run()
	})
	return id
}

// baseSpec is a sandbox of the busybox image that sleeps.
func baseSpec(t *testing.T) runtime.Spec {
	return runtime.Spec{
		ID:         newID(t),
		Image:      env.image,
		Entrypoint: []string{"sleep", "100000"},
		ExecdToken: "tok-" + randomHex(8),
	}
}

func mustCreate(t *testing.T, r *Runtime, spec runtime.Spec) runtime.Sandbox {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sb, err := r.Create(ctx, spec)
	if err != nil {
		t.Fatalf("Create(%s): %v", spec.ID, err)
	}
	return sb
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var testHTTP = &http.Client{Transport: &http.Transport{Proxy: nil}}

// execResult is what one /command stream said.
type execResult struct {
	stdout, stderr []string
	exit           string // "0" or the error's evalue
}

// run runs command through execd at Address(44772) of sandbox id.
func run(t *testing.T, r *Runtime, id, token, command string) execResult {
	t.Helper()
	a, err := r.Address(testCtx(t), id, 44772)
	if err != nil {
		t.Fatalf("Address(%s, 44772): %v", id, err)
	}
	body, _ := json.Marshal(map[string]any{"command": command})
	req, _ := http.NewRequest(http.MethodPost, urlOf(a, "/command"), bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(execdTokenHeader, token)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := testHTTP.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("POST /command %q: %v", command, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST /command %q: %s %s", command, resp.Status, b)
	}
	// The stream is JSON objects separated by blank lines.
	var res execResult
	dec := json.NewDecoder(resp.Body)
	for {
		var ev struct {
			Type  string `json:"type"`
			Text  string `json:"text"`
			Error *struct {
				Value string `json:"evalue"`
			} `json:"error"`
		}
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("POST /command %q: decode stream: %v", command, err)
		}
		switch ev.Type {
		case "stdout":
			res.stdout = append(res.stdout, ev.Text)
		case "stderr":
			res.stderr = append(res.stderr, ev.Text)
		case "execution_complete":
			res.exit = "0"
		case "error":
			if ev.Error != nil {
				res.exit = ev.Error.Value
			}
		}
	}
	return res
}

func urlOf(a runtime.Address, p string) string {
	return "http://" + net.JoinHostPort(a.Host, strconv.Itoa(a.Port)) + a.PathPrefix + p
}

// get makes one GET with a short timeout and returns status and body.
func get(a runtime.Address, p, token string, timeout time.Duration) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, urlOf(a, p), nil)
	if token != "" {
		req.Header.Set(execdTokenHeader, token)
	}
	resp, err := testHTTP.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// poll calls cond until it is true or the deadline passes.
func poll(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for delay := 5 * time.Millisecond; !cond(); delay = min(delay*2, 200*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %s", what, timeout)
		}
		time.Sleep(delay)
	}
}

// wantClass fails unless err is of class want.
func wantClass(t *testing.T, call string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: error %v, want class %q", call, err, want)
	}
}

// containerExists asks the CLI whether a container of that name exists.
func containerExists(name string) bool {
	return exec.Command("docker", "container", "inspect", name).Run() == nil
}

func volumeExists(name string) bool {
	return exec.Command("docker", "volume", "inspect", name).Run() == nil
}

func itoa(n int) string { return strconv.Itoa(n) }

var imageRemoveForce = image.RemoveOptions{Force: true, PruneChildren: true}

func dockerRun(args ...string) ([]byte, error) {
	return exec.Command("docker", args...).CombinedOutput()
}
