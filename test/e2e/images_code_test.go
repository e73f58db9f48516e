package e2e

import (
	"encoding/json"
	osexec "os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

const codeImageRef = "opensandbox/code-interpreter:latest"

// inCodeImage is inImage on the code-interpreter image.
func inCodeImage(t *testing.T, user, script string) string {
	t.Helper()
	return inImage(t, codeImageRef, user, script)
}

func TestImageCodeInterpreter(t *testing.T) {
	runBuildScript(t, "code-interpreter")

	hash, _ := runBuildScript(t, "--hash", "code-interpreter")
	hash = strings.TrimSpace(hash)
	var img struct {
		ID     string `json:"Id"`
		Config struct {
			Env    []string
			Cmd    []string
			Labels map[string]string
		}
	}
	if err := json.Unmarshal([]byte(docker(t, "image", "inspect", "--format", "{{json .}}", codeImageRef)), &img); err != nil {
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
	if id := docker(t, "image", "inspect", "--format", "{{.Id}}", "opensandbox/code-interpreter:"+hash); id != img.ID {
		t.Errorf("opensandbox/code-interpreter:%s = %s, want the same image as latest (%s)", hash, id, img.ID)
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
	id := docker(t, "run", "-d", "--network", "none", "--label", testLabel, codeImageRef)
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
