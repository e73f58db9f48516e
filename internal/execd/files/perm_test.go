package files

import (
	"io/fs"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func TestModeWire(t *testing.T) {
	tests := []struct {
		wire int
		mode fs.FileMode
	}{
		{0, 0},
		{644, 0o644},
		{755, 0o755},
		{7, 0o7},
		{4755, 0o755 | fs.ModeSetuid},
		{2750, 0o750 | fs.ModeSetgid},
		{1777, 0o777 | fs.ModeSticky},
		{7777, 0o777 | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky},
	}
	for _, tt := range tests {
		got, err := modeFromWire(tt.wire)
		if err != nil || got != tt.mode {
			t.Errorf("modeFromWire(%d) = %v, %v; want %v", tt.wire, got, err, tt.mode)
		}
		if back := modeToWire(tt.mode | fs.ModeDir); back != tt.wire {
			t.Errorf("modeToWire(%v) = %d, want %d", tt.mode, back, tt.wire)
		}
	}
	for _, bad := range []int{-1, 8, 78, 789, 800, 9999, 10000, 17777} {
		if m, err := modeFromWire(bad); err == nil {
			t.Errorf("modeFromWire(%d) = %v, nil; want an error", bad, m)
		}
	}
}

func TestChmod(t *testing.T) {
	e := newEnv(t)
	a := e.write("a.sh", "#!/bin/sh\n", 0o600)
	b := e.write("sub/b.txt", "b", 0o600)

	rep := e.do("POST", "/files/permissions", map[string]sandbox.Permission{
		"a.sh":        {Mode: 755},
		b:             {Mode: 4750},
		e.dir:         {Mode: 1777},
		"sub/../a.sh": {Mode: 755},
	})
	wantOK(t, "POST /files/permissions", rep)
	for p, want := range map[string]fs.FileMode{a: 0o755, b: 0o750 | fs.ModeSetuid, e.dir: 0o777 | fs.ModeSticky} {
		if got := modeOf(t, p); got != want {
			t.Errorf("after chmod, mode of %s = %v, want %v", p, got, want)
		}
	}

	// Zero mode leaves the mode alone.
	wantOK(t, "chmod mode 0", e.do("POST", "/files/permissions", map[string]sandbox.Permission{a: {}}))
	if got := modeOf(t, a); got != 0o755 {
		t.Errorf("after chmod mode 0, mode = %v, want 0755 unchanged", got)
	}
}

func TestChmodOwner(t *testing.T) {
	needRoot(t)
	e := newEnv(t)
	p := e.write("owned", "x", 0o644)
	rep := e.do("POST", "/files/permissions", map[string]sandbox.Permission{p: {Owner: "65534", Group: "65534", Mode: 6755}})
	wantOK(t, "chmod owner 65534", rep)
	fi, _ := os.Stat(p)
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != 65534 || st.Gid != 65534 {
		t.Errorf("after chown 65534, uid/gid = %d/%d, want 65534/65534", st.Uid, st.Gid)
	}
	// setuid/setgid survive because the mode is applied after chown.
	if got := modeOf(t, p); got != 0o755|fs.ModeSetuid|fs.ModeSetgid {
		t.Errorf("mode after chown+chmod = %v, want setuid|setgid|0755", got)
	}

	// Names resolve too; root exists everywhere.
	wantOK(t, "chmod owner root", e.do("POST", "/files/permissions", map[string]sandbox.Permission{p: {Owner: "root", Group: "root"}}))
	fi, _ = os.Stat(p)
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 || st.Gid != 0 {
		t.Errorf("after chown root:root, uid/gid = %d/%d, want 0/0", st.Uid, st.Gid)
	}
}

func TestChmodErrors(t *testing.T) {
	e := newEnv(t)
	p := e.write("f", "x", 0o640)
	tests := []struct {
		name   string
		body   any
		status int
		code   string
		frag   string
	}{
		{"bad digit", map[string]sandbox.Permission{p: {Mode: 758}}, 400, apierror.CodeInvalidRequestBody, "758"},
		{"too many digits", map[string]sandbox.Permission{p: {Mode: 17777}}, 400, apierror.CodeInvalidRequestBody, "17777"},
		{"negative", map[string]sandbox.Permission{p: {Mode: -1}}, 400, apierror.CodeInvalidRequestBody, "-1"},
		{"unknown user", map[string]sandbox.Permission{p: {Owner: "no-such-user-xyz", Mode: 644}}, 400, apierror.CodeInvalidRequestBody, "no-such-user-xyz"},
		{"unknown group", map[string]sandbox.Permission{p: {Group: "no-such-group-xyz", Mode: 644}}, 400, apierror.CodeInvalidRequestBody, "no-such-group-xyz"},
		{"missing file", map[string]sandbox.Permission{p: {Mode: 600}, "nope": {Mode: 644}}, 404, apierror.CodeFileNotFound, "nope"},
		{"empty path", map[string]sandbox.Permission{"": {Mode: 644}}, 400, apierror.CodeInvalidPath, "empty"},
		{"NUL path", map[string]sandbox.Permission{"a\x00b": {Mode: 644}}, 400, apierror.CodeInvalidPath, `a\x00b`},
		{"not JSON", "{", 400, apierror.CodeInvalidRequestBody, "JSON"},
		{"wrong shape", "[1,2]", 400, apierror.CodeInvalidRequestBody, "JSON"},
		{"too large", `{"` + strings.Repeat("a", 2<<20) + `":{"mode":644}}`, 413, apierror.CodeRequestTooLarge, "exceeds"},
	}
	for _, tt := range tests {
		rep := e.do("POST", "/files/permissions", tt.body)
		wantErr(t, "chmod "+tt.name, rep, tt.status, tt.code, tt.frag)
	}
	// Nothing was applied by the failing requests (validate-all first).
	if got := modeOf(t, p); got != 0o640 {
		t.Errorf("after failed requests, mode = %v, want 0640 unchanged", got)
	}
}

func TestNames(t *testing.T) {
	n := newNames()
	if got := n.userName(0); got != "root" {
		t.Errorf("userName(0) = %q, want root", got)
	}
	if got := n.userName(54321); got != "54321" {
		t.Errorf("userName(54321) = %q, want \"54321\"", got)
	}
	if got := n.groupName(54321); got != "54321" {
		t.Errorf("groupName(54321) = %q, want \"54321\"", got)
	}
	want := "65534"
	if u, err := user.LookupId("65534"); err == nil {
		want = u.Username
	}
	if got := n.userName(65534); got != want {
		t.Errorf("userName(65534) = %q, want %q", got, want)
	}
	for _, tt := range []struct {
		in   string
		want int
		ok   bool
	}{{"root", 0, true}, {"0", 0, true}, {"65534", 65534, true}, {"4294967295", 0, false}, {"-3", 0, false}, {"no-such-user-xyz", 0, false}} {
		got, err := n.uid(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("uid(%q) = %d, %v; want %d, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
		// Cached answers agree.
		if got2, err2 := n.uid(tt.in); got2 != got || (err2 == nil) != (err == nil) {
			t.Errorf("uid(%q) second call = %d, %v; want %d, %v", tt.in, got2, err2, got, err)
		}
	}
	if g, err := n.gid("root"); err != nil || g != 0 {
		t.Errorf("gid(root) = %d, %v; want 0", g, err)
	}
	if g, err := n.gid(strconv.Itoa(123)); err != nil || g != 123 {
		t.Errorf("gid(123) = %d, %v; want 123", g, err)
	}
}
