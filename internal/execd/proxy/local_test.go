package proxy

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestLocal(t *testing.T) {
	const self = 44772
	tests := []struct {
		name, target string
		self         int
		local        bool
		path, raw    string // want URL.Path and URL.EscapedPath()
		query        string
	}{
		{"execd route", "/proxy/44772/files/info?path=%2Ftmp%2Fa", self, true, "/files/info", "/files/info", "path=%2Ftmp%2Fa"},
		{"bare self", "/proxy/44772", self, true, "/", "/", ""},
		{"self with slash", "/proxy/44772/", self, true, "/", "/", ""},
		{"escapes kept", "/proxy/44772/a%2Fb/c%20d", self, true, "/a/b/c d", "/a%2Fb/c%20d", ""},
		{"leading zeros", "/proxy/0044772/ping", self, true, "/ping", "/ping", ""},
		{"encoded port digits", "/proxy/%344772/ping", self, true, "/ping", "/ping", ""},
		{"nested self prefixes", "/proxy/44772/proxy/44772/ping", self, true, "/ping", "/ping", ""},
		{"self then another port", "/proxy/44772/proxy/3000/x", self, true, "/proxy/3000/x", "/proxy/3000/x", ""},
		{"another port", "/proxy/3000/ping", self, false, "", "", ""},
		{"another port then self", "/proxy/3000/proxy/44772/ping", self, false, "", "", ""},
		{"port with a suffix", "/proxy/44772x/ping", self, false, "", "", ""},
		{"signed port", "/proxy/+44772/ping", self, false, "", "", ""},
		{"port too large", "/proxy/110308/ping", self, false, "", "", ""}, // 44772 + 65536
		{"self unknown", "/proxy/44772/ping", 0, false, "", "", ""},
		{"self out of range", "/proxy/44772/ping", 44772 + 65536, false, "", "", ""},
		{"other route", "/proxyx/44772/ping", self, false, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, tt.target, nil)
			before := r.URL.String()
			got, ok := Local(r, tt.self)
			if r.URL.String() != before {
				t.Fatalf("Local changed the caller's request URL to %q", r.URL)
			}
			if ok != tt.local {
				t.Fatalf("Local(%s, %d) local = %v, want %v", tt.target, tt.self, ok, tt.local)
			}
			if !ok {
				if got != r {
					t.Errorf("Local(%s) returned another request although not local", tt.target)
				}
				return
			}
			if got.URL.Path != tt.path || got.URL.EscapedPath() != tt.raw || got.URL.RawQuery != tt.query {
				t.Errorf("Local(%s) = path %q escaped %q query %q, want %q %q %q",
					tt.target, got.URL.Path, got.URL.EscapedPath(), got.URL.RawQuery, tt.path, tt.raw, tt.query)
			}
		})
	}
}
