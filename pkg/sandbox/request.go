package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// maxErrorBody caps how much of an error reply is read into an APIError.
const maxErrorBody = 64 << 10

// call is one request of the private send path.
type call struct {
	method      string
	url         string      // absolute, without query
	query       url.Values  // may be nil
	header      http.Header // extra headers (API key, execd token, Range ...)
	body        any         // JSON-encoded when non-nil
	contentType string      // of body or raw; default application/json for body
	raw         io.Reader   // streamed body; such a call is never retried
	stream      bool        // the caller reads and closes the reply body; no request timeout
	noRetry     bool
}

// do sends a non-streaming call and decodes a 2xx reply into out: a
// *string or *[]byte takes the body as is, anything else non-nil is JSON.
// It returns the reply headers.
func (c *Client) do(ctx context.Context, cl *call, out any) (http.Header, error) {
	if c.o.requestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.o.requestTimeout)
		defer cancel()
	}
	resp, err := c.send(ctx, cl)
	if err != nil {
		return nil, err
	}
	defer closeBody(resp.Body)
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%s %s: read reply: %w", cl.method, cl.url, err)
	}
	switch out := out.(type) {
	case nil:
	case *string:
		*out = string(data)
	case *[]byte:
		*out = data
	default:
		if err := json.Unmarshal(data, out); err != nil {
			return nil, fmt.Errorf("%s %s: decode reply: %w", cl.method, cl.url, err)
		}
	}
	return resp.Header, nil
}

// send builds and sends cl, retrying idempotent calls per the RetryPolicy.
// It returns a 2xx reply whose body the caller must close, an *APIError for
// any other status, or the context's error undecorated.
func (c *Client) send(ctx context.Context, cl *call) (*http.Response, error) {
	var payload []byte
	if cl.body != nil {
		b, err := json.Marshal(cl.body)
		if err != nil {
			return nil, fmt.Errorf("%s %s: encode request: %w", cl.method, cl.url, err)
		}
		payload = b
	}
	target := cl.url
	if len(cl.query) > 0 {
		target += "?" + cl.query.Encode()
	}
	retries := 0
	if idempotent(cl.method) && cl.raw == nil && !cl.noRetry {
		retries = c.o.retry.MaxRetries
	}
	wait := c.o.retry.Initial
	for attempt := 0; ; attempt++ {
		var body io.Reader
		switch {
		case cl.raw != nil:
			body = cl.raw
		case payload != nil:
			body = bytes.NewReader(payload)
		}
		req, err := http.NewRequestWithContext(ctx, cl.method, target, body)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", cl.method, cl.url, err)
		}
		for k, vs := range c.o.headers {
			req.Header[k] = append([]string(nil), vs...)
		}
		for k, vs := range cl.header {
			req.Header[k] = append([]string(nil), vs...)
		}
		req.Header.Set("User-Agent", c.o.userAgent)
		if body != nil {
			ct := cl.contentType
			if ct == "" {
				ct = "application/json"
			}
			req.Header.Set("Content-Type", ct)
		}
		if req.Header.Get("Accept") == "" && !cl.stream {
			req.Header.Set("Accept", "application/json")
		}
		resp, err := c.hc.Do(req)
		var retryAfter time.Duration
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			err = fmt.Errorf("%s %s: %w", cl.method, cl.url, err)
		} else if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			return resp, nil
		} else {
			data, rerr := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
			closeBody(resp.Body)
			if rerr != nil && ctx.Err() != nil {
				return nil, ctx.Err()
			}
			ae := parseAPIError(resp.StatusCode, resp.Header, data)
			if !retryableStatus(resp.StatusCode) {
				return nil, ae
			}
			err = ae
			if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && s >= 0 {
				retryAfter = time.Duration(s) * time.Second
			}
		}
		if attempt >= retries {
			return nil, err
		}
		d := wait
		if retryAfter > d {
			d = retryAfter
		}
		d = min(d, c.o.retry.Max)
		wait = min(wait*2, c.o.retry.Max)
		if serr := sleepCtx(ctx, d); serr != nil {
			return nil, serr
		}
	}
}

func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

func retryableStatus(code int) bool {
	switch code {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// closeBody drains a little of what is left so the connection can be
// reused, then closes the body.
func closeBody(rc io.ReadCloser) {
	io.Copy(io.Discard, io.LimitReader(rc, 64<<10))
	rc.Close()
}

// sleepCtx waits d or until ctx ends, returning ctx's error then.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// isCtxErr reports whether err is a context cancellation or deadline.
func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// wrap adds what was being done to err, leaving context errors
// undecorated so callers can compare them with ==.
func wrap(err error, format string, args ...any) error {
	if err == nil || isCtxErr(err) {
		return err
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}
