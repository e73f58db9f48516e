package sandbox

import (
	"net/http"
	"time"
)

// Environment variables read by NewClient before its options are applied.
const (
	EnvDomain         = "OPEN_SANDBOX_DOMAIN"           // like WithDomain
	EnvAPIKey         = "OPEN_SANDBOX_API_KEY"          // like WithAPIKey
	EnvProtocol       = "OPEN_SANDBOX_PROTOCOL"         // like WithProtocol
	EnvUseServerProxy = "OPEN_SANDBOX_USE_SERVER_PROXY" // like WithServerProxy; strconv.ParseBool syntax
)

// Defaults of a Client.
const (
	defaultDomain         = "localhost:8080"
	defaultProtocol       = "http"
	defaultRequestTimeout = 30 * time.Second
	sdkVersion            = "0.1.0"
	defaultUserAgent      = "opensandbox-go-sdk/" + sdkVersion
)

// Option configures a Client; see NewClient.
type Option func(*options)

type options struct {
	domain         string
	apiKey         string
	protocol       string
	serverProxy    bool
	hc             *http.Client
	headers        http.Header
	requestTimeout time.Duration
	retry          RetryPolicy
	userAgent      string
}

// RetryPolicy says how often idempotent calls (GET, HEAD, PUT, DELETE) are
// retried on 429, 502, 503 and 504 replies and on connection errors. POST
// and PATCH are never retried. The wait starts at Initial and doubles up to
// Max; a Retry-After header in seconds is honoured up to Max.
//
// The default policy is MaxRetries 3, Initial 500ms, Max 30s. MaxRetries 0
// turns retries off; a zero Initial or Max takes its default.
type RetryPolicy struct {
	MaxRetries int
	Initial    time.Duration
	Max        time.Duration
}

// DefaultRetryPolicy returns the policy a Client uses unless WithRetry is
// given: 3 retries, 500ms doubling up to 30s.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{MaxRetries: 3, Initial: 500 * time.Millisecond, Max: 30 * time.Second}
}

func (p RetryPolicy) normalized() RetryPolicy {
	if p.Initial <= 0 {
		p.Initial = 500 * time.Millisecond
	}
	if p.Max <= 0 {
		p.Max = 30 * time.Second
	}
	if p.Max < p.Initial {
		p.Max = p.Initial
	}
	return p
}

// WithDomain sets the server address as "host:port", optionally with a
// scheme ("https://sandbox.example.com"), which then wins over WithProtocol.
// A path after the host is kept as a prefix. Default "localhost:8080", or
// $OPEN_SANDBOX_DOMAIN.
func WithDomain(domain string) Option { return func(o *options) { o.domain = domain } }

// WithAPIKey sets the key sent in the OPEN-SANDBOX-API-KEY header. Default
// $OPEN_SANDBOX_API_KEY; no header when empty.
func WithAPIKey(key string) Option { return func(o *options) { o.apiKey = key } }

// WithProtocol sets "http" (the default, or $OPEN_SANDBOX_PROTOCOL) or
// "https". It applies to the lifecycle API and to execd endpoints.
func WithProtocol(p string) Option { return func(o *options) { o.protocol = p } }

// WithServerProxy makes sandboxes reached through the server's proxy route
// instead of their direct endpoints, for clients that cannot reach the
// sandbox hosts. Default false, or $OPEN_SANDBOX_USE_SERVER_PROXY.
func WithServerProxy(on bool) Option { return func(o *options) { o.serverProxy = on } }

// WithHTTPClient sets the HTTP client for every request. Its Timeout should
// be zero, since streams (command output, downloads, metrics) last as long
// as they need; use WithRequestTimeout instead. Default: a client with a
// pooled transport cloned from http.DefaultTransport.
func WithHTTPClient(hc *http.Client) Option { return func(o *options) { o.hc = hc } }

// WithHeader adds a header sent on every lifecycle and execd request. It
// may be given several times.
func WithHeader(key, value string) Option {
	return func(o *options) {
		if o.headers == nil {
			o.headers = http.Header{}
		}
		o.headers.Add(key, value)
	}
}

// WithRequestTimeout bounds each non-streaming request, retries included.
// Default 30s; 0 means no bound beyond the caller's context. Streams
// (Run, RunInSession, Open, Download, Upload, WatchMetrics) are bounded only
// by the context.
func WithRequestTimeout(d time.Duration) Option { return func(o *options) { o.requestTimeout = d } }

// WithRetry sets the retry policy; see RetryPolicy. Default
// DefaultRetryPolicy().
func WithRetry(p RetryPolicy) Option { return func(o *options) { o.retry = p } }

// WithUserAgent sets the User-Agent of every request. Default
// "opensandbox-go-sdk/<version>".
func WithUserAgent(ua string) Option { return func(o *options) { o.userAgent = ua } }
