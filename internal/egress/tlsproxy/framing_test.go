package tlsproxy

import (
	"net/http"
	"strings"
	"testing"
)

// TestNoContentTypeInvented: an answer without Content-Type reaches the
// sandbox without one; the front end must not sniff one from the body (it
// did, and so does httputil.ReverseProxy for bodies of known length).
func TestNoContentTypeInvented(t *testing.T) {
	d := newDiffRig(t, nil)
	for _, resp := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 15\r\n\r\n<html>hi</html>",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\n\r\n<script>x</script>", // ends with the connection
		"HTTP/1.1 200 OK\r\nTrailer: X-T\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\nX-T: v\r\n\r\n",
	} {
		our, _ := d.run(closing(resp), "GET / HTTP/1.1\r\nHost: origin.test\r\n\r\n", []string{"GET"})
		if len(our.sandbox) != 1 || our.sandbox[0].Status != 200 {
			t.Fatalf("%q: sandbox got %v", resp, our.sandbox)
		}
		if ct, ok := our.sandbox[0].Header["Content-Type"]; ok {
			t.Errorf("%q: the sandbox got Content-Type %q the origin did not send", resp, ct)
		}
	}
}

// TestTrailersCarryNoFraming: trailer fields that frame or route a message
// (Content-Length, Transfer-Encoding, Host) or are hop-by-hop are dropped in
// both directions, so an origin or a client that merges trailers into the
// header section cannot be steered by them. Other trailers pass.
func TestTrailersCarryNoFraming(t *testing.T) {
	d := newDiffRig(t, nil)
	bad := "Content-Length: 99\r\nTransfer-Encoding: chunked\r\nHost: other.test\r\nConnection: close\r\nKeep-Alive: 1\r\nTrailer: X-Z\r\n"
	our, _ := d.run(fixed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-R\r\n\r\n2\r\nab\r\n0\r\nX-R: r\r\n"+bad+"\r\n"),
		"POST / HTTP/1.1\r\nHost: origin.test\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n3\r\nabc\r\n0\r\nX-T: t\r\n"+bad+"\r\n",
		[]string{"POST"})
	if len(our.origin) != 1 || len(our.sandbox) != 1 {
		t.Fatalf("origin got %v, sandbox got %v", our.origin, our.sandbox)
	}
	check := func(side string, tr http.Header, keep string) {
		t.Helper()
		if len(tr) != 1 || tr.Get(keep) == "" {
			t.Errorf("%s decoded trailers %v, want only %s", side, sortedHeader(tr), keep)
		}
	}
	check("origin", our.origin[0].Trailer, "X-T")
	check("sandbox", our.sandbox[0].Trailer, "X-R")
	if ann := our.sandbox[0].Header["Trailer"]; len(ann) > 0 {
		t.Errorf("sandbox saw the Trailer header %q (decoded into Trailer, not Header)", ann)
	}
}

// TestInformationalHopHeadersRemoved: a 1xx answer's hop-by-hop fields (and
// those its Connection names) are not passed on, as for final answers.
func TestInformationalHopHeadersRemoved(t *testing.T) {
	d := newDiffRig(t, nil)
	our, _ := d.run(fixed("HTTP/1.1 103 Early Hints\r\nConnection: X-Hop\r\nX-Hop: 1\r\nKeep-Alive: 1\r\nUpgrade: x\r\nLink: </s>\r\n\r\n"+okResp),
		"GET / HTTP/1.1\r\nHost: origin.test\r\n\r\n", []string{"GET"})
	if len(our.sandbox) != 2 || our.sandbox[0].Status != 103 || our.sandbox[1].Status != 200 {
		t.Fatalf("sandbox got %v", our.sandbox)
	}
	h := our.sandbox[0].Header
	if len(h) != 1 || h.Get("Link") != "</s>" {
		t.Errorf("103 reached the sandbox with %v, want only Link", sortedHeader(h))
	}
}

// TestSecretInFieldNameDropped: an origin that echoes the injected secret as
// a field name (of a 1xx answer, the final one or a trailer) does not show
// it to the sandbox, in any case: names reach it canonicalized.
func TestSecretInFieldNameDropped(t *testing.T) {
	d := newDiffRig(t, fuzzPlan)
	name := strings.ToUpper(fuzzSecret)
	our, _ := d.run(fixed("HTTP/1.1 103 Early Hints\r\n"+name+": 1\r\nLink: </s>\r\n\r\n"+
		"HTTP/1.1 200 OK\r\nX-"+name+"-Y: 1\r\nTrailer: "+name+"\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n"+name+": 2\r\nX-T: 3\r\n\r\n"),
		"GET / HTTP/1.1\r\nHost: origin.test\r\n\r\n", []string{"GET"})
	if strings.Contains(strings.ToLower(our.raw), strings.ToLower(fuzzSecret)) {
		t.Errorf("the sandbox read the secret: %q", our.raw)
	}
	if len(our.sandbox) != 2 || our.sandbox[1].Body != "ok" || our.sandbox[1].Trailer.Get("X-T") != "3" || our.sandbox[0].Header.Get("Link") == "" {
		t.Errorf("sandbox got %v, want a 103 with Link and ok with trailer X-T", our.sandbox)
	}
}
