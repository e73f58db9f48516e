// Package tlsproxy is the egress sidecar's credential-injecting TLS proxy. It
// holds a per-sandbox certificate authority (generated at start, exported as
// PEM for the sandbox to trust, never reused), mints leaf certificates per
// server name on demand, terminates the sandbox's HTTPS connections, applies
// what an Injector (the credential vault) binds to each request (auth
// headers, placeholders replaced by secrets; see package inject) and
// forwards the request to the real origin over TLS verified against the
// system roots.
//
// ServePlain is the same proxy for plain HTTP (port 80): without a
// certificate to tie a request to a name, a request a binding matches is
// sent to the bound host, resolved by Config.Resolve, never to the address
// the sandbox connected to.
//
// Only connections a binding could match are terminated. The proxy reads
// each connection's ClientHello without answering it; when the Injector (as
// a HostMatcher) rules out every request to that SNI name (or, without SNI,
// destination IP) and port, the connection is spliced to its original
// destination byte for byte, keeping the origin's certificate and ALPN. The
// decision is per connection, taken when it opens.
//
// Only HTTP/1.1 is spoken on terminated connections (ALPN offers http/1.1
// only). Bodies stream both ways; only a request body with substitutions
// of at most 1 MiB is read whole (to keep its Content-Length exact). Header values
// and payload are never logged. Origin connections are kept alive and reused (and their TLS
// sessions resumed) only for the same original destination and server
// name; credentials are per request, never per connection.
//
// The package uses the standard library (and package inject) only and must
// not import the vault package: consumers hand it anything with a Match method (and, optionally,
// MayMatch).
package tlsproxy

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/egress/hostname"
)

// Validity periods. The CA lives as long as a long-running sandbox might;
// leaves are short and re-minted before they expire.
const (
	caValidity     = 365 * 24 * time.Hour
	leafValidity   = 7 * 24 * time.Hour
	leafRenewAfter = 6 * 24 * time.Hour
	maxLeaves      = 4096
)

// CA is a per-sandbox certificate authority that mints leaf certificates.
// Its private key never leaves the process.
type CA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	now     func() time.Time

	mu     sync.Mutex
	leaves map[string]*leaf
}

type leaf struct {
	once    sync.Once
	cert    *tls.Certificate
	err     error
	renewAt time.Time
}

// NewCA generates a fresh ECDSA P-256 CA named after the sandbox.
func NewCA(sandboxID string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{CommonName: "OpenSandbox credential proxy CA " + sandboxID, Organization: []string{"OpenSandbox"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	return &CA{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		now:     time.Now,
		leaves:  make(map[string]*leaf),
	}, nil
}

// Certificate returns the CA certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// CertPEM returns the CA certificate in PEM form, for the sandbox to trust.
func (ca *CA) CertPEM() []byte { return append([]byte(nil), ca.certPEM...) }

// WriteCertFile writes the CA certificate (never the key) to path, atomically
// and world-readable, creating parent directories.
func (ca *CA) WriteCertFile(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write CA certificate: %w", err)
	}
	f, err := os.CreateTemp(dir, ".ca-*.pem")
	if err != nil {
		return fmt.Errorf("write CA certificate: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(ca.certPEM); err != nil {
		f.Close()
		return fmt.Errorf("write CA certificate: %w", err)
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return fmt.Errorf("write CA certificate: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write CA certificate: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write CA certificate: %w", err)
	}
	return nil
}

// Leaf returns a certificate for host (a DNS name or IP literal), minting it
// on first use and caching it until it nears expiry. Concurrent callers for
// the same host share one minting.
func (ca *CA) Leaf(host string) (*tls.Certificate, error) {
	host = hostname.Canonical(host)
	if host == "" {
		return nil, fmt.Errorf("mint certificate: empty host")
	}
	now := ca.now()
	ca.mu.Lock()
	l := ca.leaves[host]
	if l != nil && now.After(l.renewAt) {
		l = nil
	}
	if l == nil {
		if len(ca.leaves) >= maxLeaves {
			clear(ca.leaves)
		}
		l = &leaf{renewAt: now.Add(leafRenewAfter)} // renewAt is fixed before anyone can see l
		ca.leaves[host] = l
	}
	ca.mu.Unlock()
	l.once.Do(func() {
		l.cert, l.err = ca.mint(host, now)
	})
	if l.err != nil {
		ca.mu.Lock()
		if ca.leaves[host] == l {
			delete(ca.leaves, host)
		}
		ca.mu.Unlock()
	}
	return l.cert, l.err
}

func (ca *CA) mint(host string, now time.Time) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("mint certificate for %q: %w", host, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: randomSerial(),
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(leafValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if tmpl.NotAfter.After(ca.cert.NotAfter) {
		tmpl.NotAfter = ca.cert.NotAfter
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("mint certificate for %q: %w", host, err)
	}
	parsed, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("mint certificate for %q: %w", host, err)
	}
	return &tls.Certificate{Certificate: [][]byte{der, ca.cert.Raw}, PrivateKey: crypto.Signer(key), Leaf: parsed}, nil
}

func randomSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err)) // crypto/rand does not fail on supported platforms
	}
	return n
}
