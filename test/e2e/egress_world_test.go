package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// egressWorld is what a sandbox behind an egress sidecar may or may not
// reach in the tests: a DNS server answering a fixed zone, an HTTPS origin
// with a certificate from a test CA that records the headers it received,
// and a plain HTTP server. Everything listens on addresses the test picks
// (loopback, the Docker bridge or a test network namespace).
type egressWorld struct {
	dnsAddr   string // ip:port of the DNS server
	caFile    string // PEM of the CA that signed the origin's certificate
	httpsAddr string
	httpAddr  string

	mu   sync.Mutex
	seen map[string]http.Header // path → headers the origin received
}

// listenFuncs opens the world's sockets; tests in network namespaces
// create them inside the namespace.
type listenFuncs struct {
	tcp func(addr string) (net.Listener, error)
	udp func(addr string) (net.PacketConn, error)
}

var hostListen = listenFuncs{
	tcp: func(addr string) (net.Listener, error) { return net.Listen("tcp", addr) },
	udp: func(addr string) (net.PacketConn, error) { return net.ListenPacket("udp", addr) },
}

// startEgressWorld serves the world on ip. zone maps names to A records;
// dnsPort is the DNS server's port ("0" for any) and httpsPort the
// origin's (443 for transparent interception).
func startEgressWorld(t *testing.T, ip, dnsPort, httpsPort string, zone map[string]string, lf listenFuncs) *egressWorld {
	t.Helper()
	w := &egressWorld{seen: map[string]http.Header{}}

	// DNS, UDP and TCP on one port. A port the kernel picks for UDP may be
	// taken for TCP, so a few picks are tried.
	var (
		pc   net.PacketConn
		tl   net.Listener
		port int
		err  error
	)
	for range 10 {
		if pc, err = lf.udp(net.JoinHostPort(ip, dnsPort)); err != nil {
			t.Fatalf("world DNS udp: %v", err)
		}
		port = pc.LocalAddr().(*net.UDPAddr).Port
		if tl, err = lf.tcp(net.JoinHostPort(ip, itoa(port))); err == nil || dnsPort != "0" {
			break
		}
		pc.Close()
	}
	if err != nil {
		t.Fatalf("world DNS tcp: %v", err)
	}
	w.dnsAddr = net.JoinHostPort(ip, itoa(port))
	h := dns.HandlerFunc(func(rw dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		name := strings.ToLower(q.Question[0].Name)
		addr, ok := zone[strings.TrimSuffix(name, ".")]
		switch {
		case !ok:
			m.Rcode = dns.RcodeNameError
		case q.Question[0].Qtype == dns.TypeA:
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30}, A: net.ParseIP(addr)})
		}
		_ = rw.WriteMsg(m)
	})
	udpSrv := &dns.Server{PacketConn: pc, Handler: h}
	tcpSrv := &dns.Server{Listener: tl, Handler: h}
	go func() { _ = udpSrv.ActivateAndServe() }()
	go func() { _ = tcpSrv.ActivateAndServe() }()
	t.Cleanup(func() { _ = udpSrv.Shutdown(); _ = tcpSrv.Shutdown() })

	// The origin: certificate for every zone name and the IP, from a test CA.
	caCert, caKey := newTestCA(t)
	w.caFile = filepath.Join(t.TempDir(), "origin-ca.pem")
	if err := os.WriteFile(w.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caCert.Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range zone {
		names = append(names, n)
	}
	leaf := newLeaf(t, caCert, caKey, names, ip)
	hl, err := lf.tcp(net.JoinHostPort(ip, httpsPort))
	if err != nil {
		t.Fatalf("world HTTPS origin: %v", err)
	}
	w.httpsAddr = hl.Addr().String()
	origin := &http.Server{
		Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			w.mu.Lock()
			w.seen[r.Host+r.URL.Path] = r.Header.Clone()
			w.mu.Unlock()
			// Echo the headers back: the proxy must redact secrets in them.
			rw.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(rw).Encode(r.Header)
		}),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{leaf}},
		ReadHeaderTimeout: 5 * time.Second,
	}
	go func() { _ = origin.ServeTLS(hl, "", "") }()
	t.Cleanup(func() { _ = origin.Close() })

	pl, err := lf.tcp(net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("world HTTP: %v", err)
	}
	w.httpAddr = pl.Addr().String()
	plain := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { _, _ = rw.Write([]byte("world-ok")) }),
		ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = plain.Serve(pl) }()
	t.Cleanup(func() { _ = plain.Close() })
	return w
}

// received returns the headers the origin got for host+path.
func (w *egressWorld) received(hostPath string) (http.Header, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h, ok := w.seen[hostPath]
	return h, ok
}

func itoa(n int) string { return strconv.Itoa(n) }

func newTestCA(t *testing.T) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e origin CA"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(2 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return c, key
}

func newLeaf(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, names []string, ip string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "e2e origin"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(2 * time.Hour),
		DNSNames: names, IPAddresses: []net.IP{net.ParseIP(ip)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// plainOrigin is a plain-HTTP origin (port 80 for the credential proxy's
// plain side) that records each request and echoes it back (target,
// headers, body), as debug endpoints do: the proxy must mask the secrets
// in the echo.
type plainOrigin struct {
	name string
	mu   sync.Mutex
	seen map[string]plainRequest // Host + path → the last request
}

// plainRequest is what a plainOrigin received.
type plainRequest struct {
	Target string      `json:"target"`
	Header http.Header `json:"header"`
	Body   string      `json:"body"`
}

// startPlainOrigin serves a plainOrigin named name on ip:port.
func startPlainOrigin(t *testing.T, name, ip, port string, lf listenFuncs) *plainOrigin {
	t.Helper()
	o := &plainOrigin{name: name, seen: map[string]plainRequest{}}
	ln, err := lf.tcp(net.JoinHostPort(ip, port))
	if err != nil {
		t.Fatalf("plain origin %s on %s:%s: %v", name, ip, port, err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		req := plainRequest{Target: r.RequestURI, Header: r.Header.Clone(), Body: string(b)}
		o.mu.Lock()
		o.seen[r.Host+r.URL.Path] = req
		o.mu.Unlock()
		rw.Header().Set("X-Origin", o.name)
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(req)
	})}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return o
}

// received returns the last request for host+path.
func (o *plainOrigin) received(hostPath string) (plainRequest, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	r, ok := o.seen[hostPath]
	return r, ok
}

// count is how many distinct host+paths were requested.
func (o *plainOrigin) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.seen)
}
