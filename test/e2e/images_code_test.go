package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	osexec "os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// codeImageRef is the image this tree's recipe makes, by its hash tag:
// a build from another recipe (another checkout) moves latest, never it.
func codeImageRef(t *testing.T) string {
	t.Helper()
	hash, _ := runBuildScript(t, "--hash", "code-interpreter")
	return "opensandbox/code-interpreter:" + strings.TrimSpace(hash)
}

// inCodeImage is inImage on the code-interpreter image.
func inCodeImage(t *testing.T, user, script string) string {
	t.Helper()
	return inImage(t, codeImageRef(t), user, script)
}

func TestImageCodeInterpreter(t *testing.T) {
	runBuildScript(t, "code-interpreter")

	hash, _ := runBuildScript(t, "--hash", "code-interpreter")
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
	if err := json.Unmarshal([]byte(docker(t, "image", "inspect", "--format", "{{json .}}", codeImageRef(t))), &img); err != nil {
		t.Fatalf("decoding docker image inspect: %v", err)
	}
	c := img.Config
	if c.Labels["io.opensandbox.image"] != "code-interpreter" || c.Labels["io.opensandbox.recipe"] != hash {
		t.Errorf("labels = %v, want io.opensandbox.image=code-interpreter and io.opensandbox.recipe=%s", c.Labels, hash)
	}
	if !slices.Equal(c.Cmd, []string{"/opt/opensandbox/code-interpreter.sh"}) {
		t.Errorf("Cmd = %q, want [/opt/opensandbox/code-interpreter.sh]", c.Cmd)
	}
	for _, kv := range []string{"MPLBACKEND=Agg", "PYTHONUNBUFFERED=1", "JAVA_HOME=/usr/lib/jvm/default-java", "LANG=C.UTF-8"} {
		if !slices.Contains(c.Env, kv) {
			t.Errorf("Env = %q, want it to hold %s", c.Env, kv)
		}
	}
	if c.WorkingDir != "/workspace" {
		t.Errorf("WorkingDir = %q, want /workspace (as upstream's image)", c.WorkingDir)
	}
	// latest and upstream's version tags are the image of the hash tag.
	for _, tag := range []string{"latest", "v1.0.1", "v1.0.2", "v1.1.0"} {
		if id := docker(t, "image", "inspect", "--format", "{{.Id}}", "opensandbox/code-interpreter:"+tag); id != img.ID {
			t.Errorf("opensandbox/code-interpreter:%s = %s, want the same image as :%s (%s)", tag, id, hash, img.ID)
		}
	}
	// The runtime versions, as labels and as the entrypoint's file; each
	// is the version the runtime itself reports (checked below).
	versions := map[string]string{}
	for _, lang := range []string{"python", "java", "node", "go"} {
		v := c.Labels["io.opensandbox.versions."+lang]
		if v == "" || strings.Trim(v, "0123456789.") != "" {
			t.Errorf("label io.opensandbox.versions.%s = %q, want a version", lang, v)
		}
		versions[lang] = v
	}

	// The PNG check runs without MPLBACKEND, so the default comes from
	// /etc/matplotlibrc, and as the sandbox user, whose matplotlib cache is
	// in its home.
	const plot = `env -u MPLBACKEND python3 -c '
import matplotlib, matplotlib.pyplot as plt
print(matplotlib.get_backend())
plt.plot([1, 2, 3], [1, 4, 9])
plt.savefig("/tmp/p.png")'
head -c 8 /tmp/p.png | od -An -tx1 | tr -d " \n"; echo; test $(stat -c %s /tmp/p.png) -gt 1000 && echo big`
	for _, tt := range []struct {
		name, user, script, want string
	}{
		{"python imports", "", `python3 -c 'import ipykernel, numpy, pandas, matplotlib, PIL; print(int(numpy.arange(4).sum()), pandas.DataFrame({"a": [1, 2]}).a.sum())'`, "6 3"},
		{"python kernel spec", "", `python3 -c 'import json; print(json.load(open("/usr/share/jupyter/kernels/python3/kernel.json"))["language"])'`, "python"},
		{"matplotlib png", "sandbox", plot, "agg\n89504e470d0a1a0a\nbig"},
		{"node", "", `node -e 'console.log(1+1)'`, "2"},
		{"java", "", `printf 'System.out.println(6*7);\n/exit\n' >/tmp/a.jsh; jshell /tmp/a.jsh 2>/dev/null; java -version 2>&1 | head -n1 | cut -d'"' -f2 | cut -d. -f1; test -x "$JAVA_HOME/bin/javac" && echo javac`, "42\n17\njavac"},
		{"go", "sandbox", `cd && printf 'package main\nimport "fmt"\nfunc main() { fmt.Println(40 + 2) }\n' >m.go && go run m.go && go version | cut -d' ' -f3 | cut -d. -f1-2`, "42\ngo1.19"},
		{"git and make", "", `git --version | cut -d' ' -f1; make --version | head -n1 | cut -d' ' -f1-2; cc --version >/dev/null && echo cc`, "git\nGNU Make\ncc"},
		{"entrypoint at both paths", "", `for f in /opt/opensandbox/code-interpreter.sh /opt/code-interpreter/code-interpreter.sh; do test -x "$f" && echo x; done; readlink -f /opt/code-interpreter/code-interpreter.sh; stat -c %U:%a /opt/opensandbox`, "x\nx\n/opt/opensandbox/code-interpreter.sh\nroot:755"},
		{"no apt lists or caches", "", `find /var/lib/apt/lists /var/cache/apt -type f ! -name lock | wc -l`, "0"},
		{"python is python3, pip", "", `python -c 'import sys; print(sys.executable)'; test "$(readlink -f /usr/bin/python)" = "$(readlink -f /usr/bin/python3)" && echo python3; pip --version | cut -d' ' -f1; python -m pip --version | cut -d' ' -f1`, "/usr/bin/python\npython3\npip\npip"},
		// Debian's Python is externally managed; /etc/pip.conf lets pip install anyway.
		{"pip may install", "sandbox", `pip config list`, "global.break-system-packages='true'"},
		{"typescript", "sandbox", `cd && printf 'const n: number = 6 * 7;\nconsole.log(n);\n' >a.ts && tsc a.ts && node a.js`, "42"},
		{"workspace", "sandbox", `pwd; touch f && stat -c %U:%a /workspace`, "/workspace\nsandbox:755"},
		{"runtime versions", "", `python3 -c 'import platform; print(platform.python_version())'; sed -n 's/^JAVA_VERSION="\(.*\)"$/\1/p' "$JAVA_HOME/release"; node -p process.versions.node; go env GOVERSION | sed s/^go//; cat /opt/opensandbox/runtime-versions`,
			strings.Join([]string{versions["python"], versions["java"], versions["node"], versions["go"],
				"python " + versions["python"], "java " + versions["java"], "node " + versions["node"], "go " + versions["go"]}, "\n")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := inCodeImage(t, tt.user, tt.script); got != tt.want {
				t.Errorf("%s: got %q, want %q", tt.script, got, tt.want)
			}
		})
	}
}

// TestImageCodeInterpreterEntrypoint starts the image as the runtime does,
// with its own entrypoint, and checks that it wrote execd's env file, stays
// up, and stops promptly on SIGTERM although it is PID 1.
func TestImageCodeInterpreterEntrypoint(t *testing.T) {
	runBuildScript(t, "code-interpreter")
	id := docker(t, "run", "-d", "--network", "none", "--label", testLabel, codeImageRef(t))
	t.Cleanup(func() { osexec.Command("docker", "rm", "-f", id).Run() })

	want := []string{
		"JAVA_HOME=/usr/lib/jvm/default-java",
		"PATH=/usr/lib/jvm/default-java/bin:/usr/lib/go/bin:$PATH",
		"MPLBACKEND=Agg",
		"PYTHONUNBUFFERED=1",
	}
	var env string
	poll(t, "the entrypoint to write /opt/opensandbox/.env", func() bool {
		out, err := osexec.Command("docker", "exec", id, "cat", "/opt/opensandbox/.env").Output()
		env = strings.TrimSpace(string(out))
		return err == nil && strings.Count(env, "\n") == len(want)-1
	})
	if got := strings.Split(env, "\n"); !slices.Equal(got, want) {
		t.Errorf("/opt/opensandbox/.env = %q, want %q", got, want)
	}
	// Still running, and its PID 1 is the entrypoint script.
	if got := docker(t, "exec", id, "cat", "/proc/1/cmdline"); !strings.Contains(got, "/opt/opensandbox/code-interpreter.sh") {
		t.Errorf("PID 1 cmdline = %q, want the entrypoint", got)
	}
	if st := docker(t, "inspect", "--format", "{{.State.Status}}", id); st != "running" {
		t.Fatalf("container state %q, want running", st)
	}

	// A restart does not append the lines a second time.
	docker(t, "restart", "-t", "5", id)
	poll(t, "the restarted container", func() bool {
		return docker(t, "inspect", "--format", "{{.State.Status}}", id) == "running"
	})
	if got := docker(t, "exec", id, "cat", "/opt/opensandbox/.env"); got != strings.Join(want, "\n") {
		t.Errorf("after a restart /opt/opensandbox/.env = %q, want the same four lines", got)
	}

	start := time.Now()
	docker(t, "stop", "-t", "10", id)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("docker stop took %v: the entrypoint ignores SIGTERM", took)
	}
	if code := docker(t, "inspect", "--format", "{{.State.ExitCode}}", id); code != "0" {
		t.Errorf("exit code after SIGTERM = %s, want 0", code)
	}
}

// TestImageCodeInterpreterVersionSelection runs the entrypoint with
// upstream's runtime version variables: one the image has starts it, one
// it lacks makes it exit 2 and list the versions there are.
func TestImageCodeInterpreterVersionSelection(t *testing.T) {
	runBuildScript(t, "code-interpreter")
	ref := codeImageRef(t)
	python := imageLabel(t, ref, "io.opensandbox.versions.python")
	node := imageLabel(t, ref, "io.opensandbox.versions.node")

	// Accepted: the entrypoint says what it selected, then stays up.
	for _, env := range [][]string{
		{"PYTHON_VERSION=3"},
		{"PYTHON_VERSION=" + python[:strings.LastIndex(python, ".")], "JAVA_VERSION=17", "NODE_VERSION=v18", "GO_VERSION=1.19"},
		{"PYTHON_VERSION=" + python},
	} {
		args := []string{"run", "--rm", "--network", "none", "--label", testLabel, "--entrypoint", "timeout"}
		for _, e := range env {
			args = append(args, "-e", e)
		}
		args = append(args, ref, "2", "/opt/opensandbox/code-interpreter.sh")
		out, err := osexec.Command("docker", args...).CombinedOutput()
		var ee *osexec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 124 { // timeout stopped it: still running
			t.Errorf("entrypoint with %q: %v (want it still running after 2s)\n%s", env, err, out)
		}
		if !strings.Contains(string(out), "using python "+python) {
			t.Errorf("entrypoint with %q said %q, want it to name python %s", env, out, python)
		}
	}

	// Refused: exit 2, and the message lists what there is.
	for _, env := range [][]string{{"PYTHON_VERSION=2.7"}, {"PYTHON_VERSION=3.1"}, {"NODE_VERSION=22", "PYTHON_VERSION=3"}} {
		args := []string{"run", "--rm", "--network", "none", "--label", testLabel}
		for _, e := range env {
			args = append(args, "-e", e)
		}
		args = append(args, ref)
		var stdout, stderr bytes.Buffer
		cmd := osexec.Command("docker", args...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *osexec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("entrypoint with %q: %v, want exit code 2\nstdout %s\nstderr %s", env, err, &stdout, &stderr)
			continue
		}
		lang, ver := "python", python
		if strings.HasPrefix(env[0], "NODE") {
			lang, ver = "node", node
		}
		for _, want := range []string{env[0] + ", but this image has " + lang + " " + ver, "available versions: python " + python + "; java "} {
			if !strings.Contains(stderr.String(), want) {
				t.Errorf("entrypoint with %q: stderr %q does not say %q", env, &stderr, want)
			}
		}
	}
}

func TestImageCodeInterpreterUpToDate(t *testing.T) {
	runBuildScript(t, "code-interpreter")
	out, took := runBuildScript(t, "code-interpreter")
	hash, _ := runBuildScript(t, "--hash", "code-interpreter")
	want := "opensandbox/code-interpreter:latest is up to date (recipe " + strings.TrimSpace(hash) + ")"
	if !slices.Contains(strings.Split(strings.TrimSpace(out), "\n"), want) || strings.Contains(out, "building") {
		t.Errorf("second build said %q, want a line %q and no build", out, want)
	}
	if took > 5*time.Second {
		t.Errorf("second build took %v, want < 5s (no rebuild)", took)
	}
	t.Logf("up-to-date check took %v", took)
}
