package tlsproxy

import (
	"bytes"
	"context"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"testing"
)

// BenchmarkUpstreamClient compares the proxy's HTTP/1.1 client (forward)
// with httputil.ReverseProxy over http.Transport, behind the same front end
// and in front of the same loopback origin, plain and over TLS: one small
// request at a time (latency), small requests from 8 goroutines
// (throughput), and an 8 MiB download. Client, front end and origin run in
// the process too, the same for both, so differences in ns/op and allocs/op
// are the clients'. The figures are in docs/egress.md.
func BenchmarkUpstreamClient(b *testing.B) {
	large := bytes.Repeat([]byte("0123456789abcdef"), 8<<20/16)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/octet-stream")
		if r.URL.Path == "/large" {
			w.Header().Set("Content-Length", strconv.Itoa(len(large)))
			w.Write(large)
			return
		}
		w.Header().Set("Content-Length", "2")
		io.WriteString(w, "ok")
	})
	for _, origin := range []string{"plain", "tls"} {
		var srv *httptest.Server
		if origin == "tls" {
			srv = httptest.NewTLSServer(handler)
		} else {
			srv = httptest.NewServer(handler)
		}
		b.Cleanup(srv.Close)
		addr := srv.Listener.Addr().String()
		for _, client := range []string{"ours", "std"} {
			front := benchFront(b, client, srv, addr)
			c := &http.Client{Transport: &http.Transport{
				DisableCompression:  true,
				MaxIdleConnsPerHost: 64,
				DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
					return (&net.Dialer{}).DialContext(ctx, network, front)
				},
			}}
			b.Cleanup(c.CloseIdleConnections)
			get := func(b *testing.B, path string) {
				resp, err := c.Get("http://origin.test" + path)
				if err != nil {
					b.Fatal(err)
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 {
					b.Fatalf("%s: %d, %v", path, resp.StatusCode, err)
				}
			}
			b.Run(origin+"/"+client+"/small", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					get(b, "/small")
				}
			})
			b.Run(origin+"/"+client+"/small-c8", func(b *testing.B) {
				b.ReportAllocs()
				b.SetParallelism(max(1, 8/runtime.GOMAXPROCS(0))) // 8 goroutines
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						get(b, "/small")
					}
				})
			})
			b.Run(origin+"/"+client+"/large", func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(large)))
				for b.Loop() {
					get(b, "/large")
				}
			})
		}
	}
}

// benchFront serves the named client (ours or std) to srv on loopback.
func benchFront(b *testing.B, client string, srv *httptest.Server, addr string) string {
	var roots *x509.CertPool
	if srv.TLS != nil {
		roots = x509.NewCertPool()
		roots.AddCert(srv.Certificate())
	}
	if client == "std" {
		h, tr := stdPath(addr, roots)
		b.Cleanup(tr.CloseIdleConnections)
		return frontEnd(b, h)
	}
	op := newOurPath(b, addr, nil)
	if roots != nil {
		op.p.upstreams.roots = roots
		op.key = upstreamKey{addr: addr, serverName: "127.0.0.1"}
	}
	return frontEnd(b, op)
}
