package tlsproxy

import (
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/egress/inject"
)

// The fuzz targets run their seeds (the differential cases) as unit tests;
// `go test -fuzz=FuzzX` explores from there (see docs/egress.md).

// fuzzTimeout bounds one exchange: inputs that promise more body than they
// send hang both paths until then.
const fuzzTimeout = 2 * time.Second

// firstMethod is the method of the first request in raw, as the sandbox
// decodes its answer (only HEAD changes that).
func firstMethod(raw string) string {
	m, _, _ := strings.Cut(raw, " ")
	return m
}

// FuzzRequestDifferential sends arbitrary bytes from the sandbox, then a
// GET on the same connection, through both clients: the origin must decode
// the same requests from both (trailers aside: see intendedDivergences),
// never fail to decode what the proxy sent, and never see a framing trailer;
// the sandbox must decode the same answers.
func FuzzRequestDifferential(f *testing.F) {
	for _, tc := range diffCases {
		if !strings.HasPrefix(tc.name, "resp") {
			f.Add(strings.TrimSuffix(tc.raw, then))
		}
	}
	d := newDiffRig(f, nil)
	d.timeout = fuzzTimeout
	f.Fuzz(func(t *testing.T, raw string) {
		if len(raw) > 4<<10 {
			return
		}
		// raw is followed by a GET /second; the sandbox reads two answers.
		methods := []string{firstMethod(raw), "GET"}
		our, std := d.run(byPath("", okResp, false), raw+then, methods)
		// What reached the origin after the second answer depends on when
		// the sandbox hung up.
		our.origin, std.origin = our.origin[:min(len(our.origin), 2)], std.origin[:min(len(std.origin), 2)]
		for _, r := range our.origin {
			if r.Err != "" && !strings.HasPrefix(r.Err, "body: ") && !undecodable(std.origin) {
				t.Errorf("the origin could not decode what the proxy sent: %v", r)
			}
			for k := range r.Trailer {
				if framingField(k) {
					t.Errorf("the origin got the trailer %s", k)
				}
			}
		}
		// After a refused first request (502) whether the connection stays
		// for the next one is each server's policy (the proxy's front end
		// ends it when the body was left unread): compare the 502 only.
		if len(our.sandbox) > 0 && len(std.sandbox) > 0 && our.sandbox[0].Status == http.StatusBadGateway && std.sandbox[0].Status == http.StatusBadGateway {
			our.sandbox, std.sandbox = our.sandbox[:1], std.sandbox[:1]
			our.sandbox[0].Err, std.sandbox[0].Err = "", ""
			our.origin, std.origin = nil, nil
		}
		// A request whose body failed (the sandbox's framing was bad) may or
		// may not have reached the origin before the connection was dropped,
		// on either side: compare what came before it.
		cut := min(firstBodyErr(our.origin), firstBodyErr(std.origin))
		our.origin, std.origin = our.origin[:min(cut, len(our.origin))], std.origin[:min(cut, len(std.origin))]
		for i := range min(len(our.origin), len(std.origin)) {
			// A request without Host (HTTP/1.0) goes out with an empty one;
			// http.Transport writes the address it dialled instead.
			if our.origin[i].Host == "" && std.origin[i].Host == d.stdOrigin.addr() {
				std.origin[i].Host = ""
			}
		}
		if o, s := dropTrailers(our.origin), dropTrailers(std.origin); !reflect.DeepEqual(o, s) {
			t.Errorf("origin decoded\n ours %v\n std  %v", o, s)
		}
		if o, s := comparable(our.sandbox, methods), comparable(std.sandbox, methods); !reflect.DeepEqual(o, s) {
			t.Errorf("sandbox decoded\n ours %v\n std  %v", o, s)
		}
	})
}

// undecodable reports whether some request head in rs failed to decode.
func undecodable(rs []originReq) bool {
	for _, r := range rs {
		if r.Err != "" && !strings.HasPrefix(r.Err, "body: ") {
			return true
		}
	}
	return false
}

// firstBodyErr is the index of the first request whose body did not
// arrive whole, or len(rs).
func firstBodyErr(rs []originReq) int {
	for i, r := range rs {
		if strings.HasPrefix(r.Err, "body: ") {
			return i
		}
	}
	return len(rs)
}

func dropTrailers(rs []originReq) []originReq {
	out := make([]originReq, len(rs))
	for i, r := range rs {
		r.Trailer = nil
		out[i] = r
	}
	return out
}

// fuzzSecret is injected by the leak check; SECRET in a fuzzed answer
// stands for it, as an origin that echoes the request would send it.
const fuzzSecret = "tok3nF0rFuzz1ngXyZ"

var fuzzPlan = &inject.Plan{Headers: http.Header{"Authorization": {"Bearer " + fuzzSecret}}}

// FuzzResponseDifferential answers a GET (or a HEAD) with arbitrary bytes,
// then a second request on the same sandbox connection with a fixed answer.
// Both clients must give the sandbox the same first answer (less the
// intended divergences), the second request must get its own answer or a
// 502 (never bytes of the first), and with a credential injected the
// sandbox must never read the secret.
func FuzzResponseDifferential(f *testing.F) {
	for _, tc := range diffCases {
		if strings.HasPrefix(tc.name, "resp") {
			_, resp, closeAfter := tc.s(&http.Request{URL: must(url.Parse("/"))})
			f.Add(resp, firstMethod(tc.raw) == "HEAD", closeAfter)
		}
	}
	f.Add("HTTP/1.1 200 OK\r\nX-Echo: Bearer SECRET\r\nSECRET: 1\r\nContent-Length: 6\r\n\r\nSECRET", false, false)
	f.Add("HTTP/1.1 103 Early Hints\r\nSECRET: 1\r\nX-E: SECRET\r\n\r\nHTTP/1.1 200 OK\r\nTrailer: SECRET\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nSECRET\r\n0\r\nSECRET: SECRET\r\nX-T: SECRET\r\n\r\n", false, false)
	f.Add("HTTP/1.1 SECRET OK\r\n\r\n", false, true)
	f.Add("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SECRET\r\n\r\nSECRET", false, true)
	d := newDiffRig(f, nil)
	d.timeout = fuzzTimeout
	leak := newDiffRig(f, fuzzPlan)
	leak.timeout = fuzzTimeout
	f.Fuzz(func(t *testing.T, resp string, head, closeAfter bool) {
		if len(resp) > 4<<10 {
			return
		}
		m := "GET"
		if head {
			m = "HEAD"
		}
		raw := m + " / HTTP/1.1\r\nHost: origin.test\r\n\r\n" + then
		methods := []string{m, "GET"}
		plain := strings.ReplaceAll(resp, "SECRET", "not-the-secret")
		our, std := d.run(byPath("", plain, closeAfter), raw, methods)
		o, s := firstAnswer(t, "ours", our.sandbox), firstAnswer(t, "std", std.sandbox)
		if n1xx(s) <= max1xxResponses {
			if o, s := comparable(o, methods), comparable(s, methods); !reflect.DeepEqual(o, s) {
				t.Errorf("sandbox decoded\n ours %v\n std  %v", o, s)
			}
		}

		withSecret := strings.ReplaceAll(resp, "SECRET", fuzzSecret)
		our, _ = leak.run(byPath("", withSecret, closeAfter), raw, methods)
		// Header names come out in canonical case: a secret there would
		// show with its case changed.
		if strings.Contains(strings.ToLower(our.raw), strings.ToLower(fuzzSecret)) {
			t.Errorf("the sandbox read the secret: %q", our.raw)
		}
		for _, r := range our.origin {
			if r.Err == "" && r.Header.Get("Authorization") != "Bearer "+fuzzSecret {
				t.Errorf("the origin got Authorization %q", r.Header.Get("Authorization"))
			}
		}
	})
}

// firstAnswer returns the answers up to the first final one, with the
// intended differences removed (100s the sandbox did not ask for, hop-by-hop
// fields of 1xx), and checks that whatever follows is the second request's
// own answer or a 502.
func firstAnswer(t *testing.T, side string, rs []sandboxResp) []sandboxResp {
	t.Helper()
	var out []sandboxResp
	i := 0
	for ; i < len(rs); i++ {
		r := rs[i]
		if r.Status == http.StatusContinue {
			continue
		}
		if r.Err == "" && r.Status < 200 && r.Status != http.StatusSwitchingProtocols {
			r.Header = r.Header.Clone()
			removeHopByHop(r.Header)
		}
		out = append(out, r)
		if r.Err != "" || r.Status >= 200 || r.Status == http.StatusSwitchingProtocols {
			i++
			break
		}
	}
	for _, r := range rs[i:] {
		if stdMayDesync(side) {
			break
		}
		if r.Err == "" && r.Status >= 200 && !(r.Status == 200 && r.Body == "second" || r.Status == http.StatusBadGateway) {
			t.Errorf("%s: the second request got %v", side, r)
		}
	}
	return out
}

func n1xx(rs []sandboxResp) int {
	n := 0
	for _, r := range rs {
		if r.Status > 100 && r.Status < 200 {
			n++
		}
	}
	return n
}
