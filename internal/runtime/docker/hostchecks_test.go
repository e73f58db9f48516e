package docker

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// TestCheckHostPaths covers the host-path allow-list without an engine:
// what is refused, why, and that the returned volumes carry the resolved
// paths the engine will mount.
func TestCheckHostPaths(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	allowed := filepath.Join(base, "allowed")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(allowed, "sub"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A link inside the allowed directory that points outside it, and a
	// link outside that points into it.
	if err := os.Symlink(outside, filepath.Join(allowed, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(allowed, "sub"), filepath.Join(outside, "in")); err != nil {
		t.Fatal(err)
	}
	// The allow-list itself is given through a link: it is resolved too.
	allowedLink := filepath.Join(base, "allowed-link")
	if err := os.Symlink(allowed, allowedLink); err != nil {
		t.Fatal(err)
	}
	real := func(p string) string {
		t.Helper()
		r, err := filepath.EvalSymlinks(p)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := &Runtime{opts: Options{AllowedHostPaths: []string{allowedLink}}}
	cases := []struct {
		name     string
		vol      runtime.Volume
		want     error  // nil: accepted
		resolved string // the HostPath handed on when accepted
		msg      string // a fragment of the refusal
	}{
		{"the allowed directory", runtime.Volume{Name: "v", HostPath: allowed}, nil, real(allowed), ""},
		{"trailing slash", runtime.Volume{Name: "v", HostPath: allowed + "/"}, nil, real(allowed), ""},
		{"below it", runtime.Volume{Name: "v", HostPath: allowed + "/sub"}, nil, real(allowed) + "/sub", ""},
		{"not yet existing below it", runtime.Volume{Name: "v", HostPath: allowed + "/new/dir"}, nil, real(allowed) + "/new/dir", ""},
		{"a link from outside into it", runtime.Volume{Name: "v", HostPath: outside + "/in"}, nil, real(allowed) + "/sub", ""},
		{"with a subPath inside", runtime.Volume{Name: "v", HostPath: allowed, SubPath: "sub"}, nil, real(allowed), ""},
		{"claims are not host paths", runtime.Volume{Name: "v", ClaimName: "c"}, nil, "", ""},
		{"outside", runtime.Volume{Name: "v", HostPath: outside}, runtime.ErrHostPathNotAllowed, "", "is not under a host path"},
		{"dotdot escape", runtime.Volume{Name: "v", HostPath: allowed + "/../outside"}, runtime.ErrHostPathNotAllowed, "", "is not under"},
		{"prefix trick", runtime.Volume{Name: "v", HostPath: allowed + "-evil"}, runtime.ErrHostPathNotAllowed, "", "is not under"},
		{"through a planted link", runtime.Volume{Name: "v", HostPath: allowed + "/escape/x"}, runtime.ErrHostPathNotAllowed, "", "is not under"},
		{"subPath through a planted link", runtime.Volume{Name: "v", HostPath: allowed, SubPath: "escape"}, runtime.ErrHostPathNotAllowed, "", `subPath "escape" leads outside`},
		{"subPath with dotdot", runtime.Volume{Name: "v", HostPath: allowed, SubPath: "../outside"}, runtime.ErrInvalid, "", "leaves the volume"},
		{"relative host path", runtime.Volume{Name: "v", HostPath: "rel"}, runtime.ErrInvalid, "", "not absolute"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := []runtime.Volume{tc.vol}
			out, err := r.checkHostPaths(in)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("checkHostPaths(%+v): %v, want it accepted", tc.vol, err)
				}
				if out[0].HostPath != tc.resolved {
					t.Errorf("HostPath = %q, want %q", out[0].HostPath, tc.resolved)
				}
				if in[0] != tc.vol {
					t.Errorf("checkHostPaths changed its input to %+v", in[0])
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("checkHostPaths(%+v) = %v, want class %q", tc.vol, err, tc.want)
			}
			if tc.want == runtime.ErrInvalid && errors.Is(err, runtime.ErrHostPathNotAllowed) {
				t.Errorf("checkHostPaths(%+v) = %v: a malformed volume is not an allow-list refusal", tc.vol, err)
			}
			if !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), `volume "v"`) {
				t.Errorf("error %q, want it to name the volume and say %q", err, tc.msg)
			}
		})
	}
}

// TestCheckHostPathsWithoutAllowList: no allowed host paths, no host volumes.
func TestCheckHostPathsWithoutAllowList(t *testing.T) {
	t.Parallel()
	r := &Runtime{opts: Options{}}
	_, err := r.checkHostPaths([]runtime.Volume{{Name: "v", HostPath: t.TempDir()}})
	if !errors.Is(err, runtime.ErrHostPathNotAllowed) || !strings.Contains(err.Error(), "allows no host volumes") {
		t.Errorf("checkHostPaths without an allow-list = %v, want ErrHostPathNotAllowed saying none are allowed", err)
	}
	if _, err := r.checkHostPaths([]runtime.Volume{{Name: "v", ClaimName: "c"}}); err != nil {
		t.Errorf("checkHostPaths of a claim without an allow-list = %v, want nil", err)
	}
}

// TestAllowedHostPathsOption: the option is cleaned and must be absolute.
func TestAllowedHostPathsOption(t *testing.T) {
	t.Parallel()
	o := Options{ExecdPath: "/x/execd", AllowedHostPaths: []string{"/srv/data/", "/a/../b"}}
	if err := o.setDefaults(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(o.AllowedHostPaths, ","); got != "/srv/data,/b" {
		t.Errorf("AllowedHostPaths = %q, want cleaned /srv/data,/b", got)
	}
	o = Options{ExecdPath: "/x/execd", AllowedHostPaths: []string{"data"}}
	if err := o.setDefaults(); !errors.Is(err, runtime.ErrInvalid) {
		t.Errorf("setDefaults with a relative allowed host path = %v, want ErrInvalid", err)
	}
}
