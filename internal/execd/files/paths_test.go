package files

import (
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
)

func TestResolve(t *testing.T) {
	h := New(Options{BaseDir: "/work/base"})
	tests := []struct {
		in, want string
		wantErr  bool
	}{
		{in: "/a/b", want: "/a/b"},
		{in: "/a//b/../c/", want: "/a/c"},
		{in: "rel/x", want: "/work/base/rel/x"},
		{in: ".", want: "/work/base"},
		{in: "../../..", want: "/"},
		{in: "./a/./b", want: "/work/base/a/b"},
		{in: "", wantErr: true},
		{in: "a\x00b", wantErr: true},
		{in: "/\x00", wantErr: true},
	}
	for _, tt := range tests {
		got, err := h.resolve(tt.in)
		if tt.wantErr {
			var ae *apierror.Error
			if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Code != apierror.CodeInvalidPath {
				t.Errorf("resolve(%q) error = %v, want 400 INVALID_PATH", tt.in, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("resolve(%q) = %q, %v; want %q, nil", tt.in, got, err, tt.want)
		}
	}
}

func TestNewDefaults(t *testing.T) {
	h := New(Options{BaseDir: "relative/dir"})
	if !filepath.IsAbs(h.base) {
		t.Errorf("New(BaseDir relative).base = %q, want absolute", h.base)
	}
	if h.maxJSON != DefaultMaxJSONBody || h.log == nil {
		t.Errorf("New(zero) = maxJSON %d, log %v; want %d and a logger", h.maxJSON, h.log, DefaultMaxJSONBody)
	}
	if h := New(Options{}); !filepath.IsAbs(h.base) {
		t.Errorf("New(no BaseDir).base = %q, want the absolute working directory", h.base)
	}
}

// FuzzResolve checks that resolve either rejects a path with 400
// INVALID_PATH or returns an absolute, clean, NUL-free path that is the
// input itself (absolute) or the input joined to the base (relative).
func FuzzResolve(f *testing.F) {
	for _, s := range []string{"", "/", ".", "..", "a/../../b", "/etc/passwd", "x\x00y", "//a//b//", "a/./b/", "~/x", "\xff\xfe"} {
		f.Add("/base", s)
		f.Add("/", s)
	}
	f.Fuzz(func(t *testing.T, base, p string) {
		if !filepath.IsAbs(base) || strings.IndexByte(base, 0) >= 0 {
			base = "/base"
		}
		h := New(Options{BaseDir: base})
		got, err := h.resolve(p)
		if p == "" || strings.IndexByte(p, 0) >= 0 {
			var ae *apierror.Error
			if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Code != apierror.CodeInvalidPath {
				t.Fatalf("resolve(%q) error = %v, want 400 INVALID_PATH", p, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("resolve(%q) = %v, want success", p, err)
		}
		if !filepath.IsAbs(got) || filepath.Clean(got) != got || strings.IndexByte(got, 0) >= 0 {
			t.Fatalf("resolve(%q) = %q, want an absolute clean path", p, got)
		}
		want := filepath.Clean(p)
		if !filepath.IsAbs(p) {
			want = filepath.Join(h.base, p)
		}
		if got != want {
			t.Fatalf("resolve(%q) = %q, want %q", p, got, want)
		}
	})
}
