package osbcli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// runOSB runs osb in-process with a temporary home and no OPEN_SANDBOX_*
// variables.
func runOSB(t *testing.T, home string, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, stdio{in: strings.NewReader(""), out: &out, err: &errb}, envOf(env), home)
	return code, out.String(), errb.String()
}

func TestRunExitCodes(t *testing.T) {
	home := t.TempDir()
	tests := []struct {
		name string
		args []string
		code int
		want string // in stderr
	}{
		{"unknown flag", []string{"sandbox", "list", "--bogus"}, 2, "unknown flag"},
		{"unknown command", []string{"sandbox", "explode"}, 2, ""},
		{"missing argument", []string{"sandbox", "get"}, 2, "<sandbox-id>"},
		{"bad output format", []string{"sandbox", "list", "-o", "xml"}, 2, "table, json, yaml, raw"},
		{"egress bad rule", []string{"egress", "patch", "sb-1", "--rule", "permit=pypi.org"}, 2, `--rule "permit=pypi.org": want ACTION=TARGET`},
		{"egress no rule", []string{"egress", "patch", "sb-1"}, 2, "give --rule"},
		{"credential proxy alone", []string{"sandbox", "create", "-i", "x", "--credential-proxy"}, 2, "needs --network-policy-file"},
		{"bad protocol", []string{"--protocol", "gopher", "sandbox", "list"}, 1, "connection.protocol"},
		{"help", []string{"--help"}, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runOSB(t, home, nil, tt.args...)
			if code != tt.code {
				t.Errorf("osb %s: exit %d, want %d; stderr:\n%s", strings.Join(tt.args, " "), code, tt.code, stderr)
			}
			if tt.want != "" && !strings.Contains(stderr, tt.want) {
				t.Errorf("osb %s: stderr %q does not contain %q", strings.Join(tt.args, " "), stderr, tt.want)
			}
			if tt.code != 0 && !strings.HasPrefix(stderr, "osb: ") {
				t.Errorf("stderr %q does not start with \"osb: \"", stderr)
			}
		})
	}
}

func TestRunConfigCommands(t *testing.T) {
	home := t.TempDir()
	if code, out, errs := runOSB(t, home, nil, "config", "init"); code != 0 || !strings.Contains(out, "config.toml") {
		t.Fatalf("config init: exit %d, %q %q", code, out, errs)
	}
	if code, _, _ := runOSB(t, home, nil, "config", "init"); code != 1 {
		t.Errorf("second config init: exit %d, want 1", code)
	}
	if code, _, errs := runOSB(t, home, nil, "config", "set", "connection.domain", "file-host:7"); code != 0 {
		t.Fatalf("config set: exit %d: %s", code, errs)
	}
	code, out, errs := runOSB(t, home, map[string]string{"OPEN_SANDBOX_API_KEY": "secret-key"}, "config", "show")
	if code != 0 {
		t.Fatalf("config show: exit %d: %s", code, errs)
	}
	for _, w := range []string{"file-host:7", "****-key", "env"} {
		if !strings.Contains(out, w) {
			t.Errorf("config show output lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "secret-key") {
		t.Errorf("config show prints the API key:\n%s", out)
	}
	os.WriteFile(filepath.Join(home, ".opensandbox", "config.toml"), []byte("[connection]\ndomian = \"x\"\n"), 0o600)
	code, _, errs = runOSB(t, home, nil, "sandbox", "list")
	if code != 1 || !strings.Contains(errs, "connection.domian") {
		t.Errorf("unknown key: exit %d, stderr %q; want 1 naming connection.domian", code, errs)
	}
}

func TestDescribeHints(t *testing.T) {
	a := &app{home: "/h", env: envOf(nil), settings: settings{Domain: "example:8080"}}
	connRefused := fmt.Errorf("list sandboxes: %w", &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)})
	tests := []struct {
		name string
		err  error
		hint string
		code int
	}{
		{"401", fmt.Errorf("x: %w", &sandbox.APIError{StatusCode: 401, Code: "INVALID_API_KEY"}), "OPEN_SANDBOX_API_KEY", 1},
		{"refused", connRefused, "running at example:8080", 1},
		{"sandbox 404", &sandbox.APIError{StatusCode: 404, Code: "SANDBOX_NOT_FOUND"}, "osb sandbox list", 1},
		{"usage", usagef("bad"), "--help", 2},
		{"canceled", fmt.Errorf("x: %w", context.Canceled), "", 130},
		{"plain", errors.New("boom"), "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, hint, code := a.describe(tt.err)
			if code != tt.code || (tt.hint == "") != (hint == "") || !strings.Contains(hint, tt.hint) {
				t.Errorf("describe(%v) = hint %q, code %d; want hint containing %q, code %d", tt.err, hint, code, tt.hint, tt.code)
			}
		})
	}
}
