package sandbox

import (
	"net/http"
	"testing"
	"time"
)

func TestNewClientBaseURL(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
		want string
	}{
		{"default", nil, "http://localhost:8080/v1"},
		{"domain", []Option{WithDomain("api.example.com:9000")}, "http://api.example.com:9000/v1"},
		{"https", []Option{WithDomain("api.example.com"), WithProtocol("https")}, "https://api.example.com/v1"},
		{"scheme in domain wins", []Option{WithDomain("https://api.example.com/"), WithProtocol("http")}, "https://api.example.com/v1"},
		{"path prefix kept", []Option{WithDomain("http://gw.example.com/osb")}, "http://gw.example.com/osb/v1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, e := range []string{EnvDomain, EnvAPIKey, EnvProtocol, EnvUseServerProxy} {
				t.Setenv(e, "")
			}
			c, err := NewClient(tc.opts...)
			if err != nil {
				t.Fatalf("NewClient: %v", err)
			}
			if got := c.BaseURL(); got != tc.want {
				t.Errorf("BaseURL() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNewClientInvalid(t *testing.T) {
	t.Setenv(EnvDomain, "")
	t.Setenv(EnvProtocol, "")
	t.Setenv(EnvUseServerProxy, "")
	for name, opts := range map[string][]Option{
		"protocol":          {WithProtocol("ftp")},
		"scheme":            {WithDomain("ftp://x")},
		"empty domain":      {WithDomain(" ")},
		"domain with query": {WithDomain("http://x/?a=b")},
		"negative timeout":  {WithRequestTimeout(-time.Second)},
	} {
		if _, err := NewClient(opts...); err == nil {
			t.Errorf("NewClient(%s) = nil error, want an error", name)
		}
	}
	t.Setenv(EnvUseServerProxy, "maybe")
	if _, err := NewClient(); err == nil {
		t.Errorf("NewClient with %s=maybe = nil error, want an error", EnvUseServerProxy)
	}
}

// TestNewClientEnv checks that the environment configures the client and
// options override it.
func TestNewClientEnv(t *testing.T) {
	s := newSDKServer(t)
	s.serveSandbox()
	s.mux.HandleFunc("GET /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		replyJSON(w, 200, ListSandboxesResponse{})
	})
	t.Setenv(EnvDomain, s.URL)
	t.Setenv(EnvAPIKey, "from-env")
	t.Setenv(EnvProtocol, "https") // the scheme in the domain wins
	t.Setenv(EnvUseServerProxy, "true")

	c, err := NewClient()
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	if c.BaseURL() != s.URL+"/v1" {
		t.Errorf("BaseURL() = %q, want %q", c.BaseURL(), s.URL+"/v1")
	}
	if _, err := c.List(testCtx(t), ListOptions{}); err != nil {
		t.Fatalf("List: %v", err)
	}
	if got := s.only(t, "GET", "/v1/sandboxes").Header.Get(APIKeyHeader); got != "from-env" {
		t.Errorf("API key header = %q, want from-env", got)
	}
	sb, err := c.Connect(testCtx(t), "sb1", ConnectOptions{})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	if want := s.URL + "/sandboxes/sb1/proxy/44772"; sb.ExecdURL() != want {
		t.Errorf("ExecdURL() with %s=true = %q, want %q", EnvUseServerProxy, sb.ExecdURL(), want)
	}

	c, err = NewClient(WithAPIKey("from-option"), WithServerProxy(false))
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	sb, err = c.Connect(testCtx(t), "sb1", ConnectOptions{})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	if want := s.URL + "/execd"; sb.ExecdURL() != want {
		t.Errorf("ExecdURL() with WithServerProxy(false) = %q, want %q", sb.ExecdURL(), want)
	}
	rs := s.requests("GET", "/v1/sandboxes/sb1")
	if got := rs[len(rs)-1].Header.Get(APIKeyHeader); got != "from-option" {
		t.Errorf("API key header = %q, want the option's from-option", got)
	}
}

func TestHealth(t *testing.T) {
	s := newSDKServer(t)
	s.mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {})
	if err := s.client(t).Health(testCtx(t)); err != nil {
		t.Fatalf("Health: %v", err)
	}
	s.only(t, "GET", "/health")
}
