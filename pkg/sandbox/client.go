package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
)

// Client talks to an OpenSandbox lifecycle server and, through the
// sandboxes it hands out, to execd inside them. It is safe for concurrent
// use; make one and share it.
type Client struct {
	o      options
	hc     *http.Client
	scheme string // "http" or "https"
	root   string // scheme://host[/prefix], no trailing slash
	base   string // root + "/v1"
}

// NewClient returns a Client configured first from the environment
// (EnvDomain, EnvAPIKey, EnvProtocol, EnvUseServerProxy) and then by opts,
// which win. It fails on a protocol other than http/https, a domain that
// does not parse, or an invalid EnvUseServerProxy value. It does not
// contact the server; see Health.
func NewClient(opts ...Option) (*Client, error) {
	o := options{
		domain:         defaultDomain,
		protocol:       defaultProtocol,
		requestTimeout: defaultRequestTimeout,
		retry:          DefaultRetryPolicy(),
		userAgent:      defaultUserAgent,
	}
	if v := os.Getenv(EnvDomain); v != "" {
		o.domain = v
	}
	if v := os.Getenv(EnvAPIKey); v != "" {
		o.apiKey = v
	}
	if v := os.Getenv(EnvProtocol); v != "" {
		o.protocol = v
	}
	if v := os.Getenv(EnvUseServerProxy); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("opensandbox: %s=%q: not a boolean", EnvUseServerProxy, v)
		}
		o.serverProxy = b
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.requestTimeout < 0 {
		return nil, errors.New("opensandbox: negative request timeout")
	}
	if o.retry.MaxRetries < 0 {
		return nil, errors.New("opensandbox: negative MaxRetries")
	}
	o.retry = o.retry.normalized()
	if o.userAgent == "" {
		o.userAgent = defaultUserAgent
	}
	scheme, root, err := baseURL(o.protocol, o.domain)
	if err != nil {
		return nil, err
	}
	hc := o.hc
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 16
		hc = &http.Client{Transport: tr}
	}
	return &Client{o: o, hc: hc, scheme: scheme, root: root, base: root + "/v1"}, nil
}

// baseURL turns protocol and domain into scheme and root URL.
func baseURL(protocol, domain string) (scheme, root string, err error) {
	protocol = strings.ToLower(strings.TrimSpace(protocol))
	domain = strings.TrimSpace(domain)
	if domain == "" {
		return "", "", errors.New("opensandbox: empty domain")
	}
	raw := domain
	if !strings.Contains(domain, "://") {
		if protocol != "http" && protocol != "https" {
			return "", "", fmt.Errorf("opensandbox: protocol %q: want http or https", protocol)
		}
		raw = protocol + "://" + domain
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", fmt.Errorf("opensandbox: domain %q: %w", domain, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", "", fmt.Errorf("opensandbox: domain %q: scheme %q, want http or https", domain, u.Scheme)
	}
	if u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", "", fmt.Errorf("opensandbox: domain %q: want host[:port] with an optional scheme and path", domain)
	}
	return u.Scheme, u.Scheme + "://" + u.Host + strings.TrimRight(u.EscapedPath(), "/"), nil
}

// BaseURL returns the lifecycle API's base URL, e.g.
// "http://localhost:8080/v1".
func (c *Client) BaseURL() string { return c.base }

// Health checks that the server answers GET /health (no API key needed).
func (c *Client) Health(ctx context.Context) error {
	_, err := c.do(ctx, &call{method: http.MethodGet, url: c.root + "/health"}, nil)
	return wrap(err, "health")
}

// lifecycle returns a call to the lifecycle API at path (below /v1).
func (c *Client) lifecycle(method, path string) *call {
	h := http.Header{}
	if c.o.apiKey != "" {
		h.Set(APIKeyHeader, c.o.apiKey)
	}
	return &call{method: method, url: c.base + path, header: h}
}
