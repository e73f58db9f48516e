package trust

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func testCA(t *testing.T, dir string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestInstallAppendsOnceAndFollowsSymlinks(t *testing.T) {
	dir := t.TempDir()
	ca := testCA(t, dir)
	debian := filepath.Join(dir, "ca-certificates.crt")
	if err := os.WriteFile(debian, []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "cert.pem")
	if err := os.Symlink(debian, link); err != nil {
		t.Fatal(err)
	}
	bundles := []string{debian, filepath.Join(dir, "absent.crt"), link}
	env := map[string]string{"REQUESTS_CA_BUNDLE": "/image/own.pem"}
	for i := 0; i < 2; i++ { // a restarted execd must not add it again
		res, err := Install(ca, bundles, dir, func(k string) string { return env[k] })
		if err != nil {
			t.Fatalf("Install: %v", err)
		}
		if len(res.Updated) != 2 || res.Env["SSL_CERT_FILE"] != debian || res.Env["NODE_EXTRA_CA_CERTS"] != ca {
			t.Fatalf("result = %+v", res)
		}
		if _, set := res.Env["REQUESTS_CA_BUNDLE"]; set {
			t.Fatal("overrode a variable the image sets")
		}
	}
	got, _ := os.ReadFile(debian)
	pemCA, _ := os.ReadFile(ca)
	if n := strings.Count(string(got), strings.TrimSpace(string(pemCA))); n != 1 {
		t.Fatalf("CA appears %d times in the bundle; want 1:\n%s", n, got)
	}
	if !strings.Contains(string(got), "-----END CERTIFICATE-----\n"+beginMark+strings.TrimSpace(string(pemCA))+"\n"+endMark) {
		t.Fatalf("CA not appended on its own lines between the markers:\n%s", got)
	}
}

func TestInstallFallbackWhenNothingWritable(t *testing.T) {
	// /proc/version is readable and not writable, even by root: it plays
	// the system bundle of an image running as an unprivileged user.
	sys, err := os.ReadFile("/proc/version")
	if err != nil {
		t.Skip("no /proc/version")
	}
	dir := t.TempDir()
	ca := testCA(t, dir)
	res, err := Install(ca, []string{"/proc/version"}, dir, func(string) string { return "" })
	if err != nil {
		t.Fatalf("Install: %v", err)
	}
	if len(res.Errors) != 1 {
		t.Fatalf("errors = %v; want the unwritable bundle reported", res.Errors)
	}
	fb := res.Env["SSL_CERT_FILE"]
	if filepath.Dir(fb) != dir {
		t.Fatalf("SSL_CERT_FILE = %q; want a fallback bundle in %s", fb, dir)
	}
	b, _ := os.ReadFile(fb)
	if !strings.HasPrefix(string(b), string(withNewline(sys))+beginMark+"-----BEGIN CERTIFICATE-----") {
		t.Fatalf("fallback bundle %s = %q", fb, b)
	}
}

// TestInstallUnwritableThroughSymlink: a second name of a bundle that could
// not be written (Alpine's cert.pem linking to the main bundle, in an image
// running as a non-root user) does not count as trusting the CA, so the
// fallback bundle is still written and the variables point at it.
func TestInstallUnwritableThroughSymlink(t *testing.T) {
	if _, err := os.ReadFile("/proc/version"); err != nil {
		t.Skip("no /proc/version")
	}
	dir := t.TempDir()
	ca := testCA(t, dir)
	link := filepath.Join(dir, "cert.pem")
	if err := os.Symlink("/proc/version", link); err != nil {
		t.Fatal(err)
	}
	res, err := Install(ca, []string{"/proc/version", link}, dir, func(string) string { return "" })
	if err != nil {
		t.Fatalf("Install: %v", err)
	}
	if len(res.Updated) != 0 {
		t.Fatalf("Updated = %v; want none (the only file could not be written)", res.Updated)
	}
	if fb := res.Env["SSL_CERT_FILE"]; filepath.Dir(fb) != dir {
		t.Fatalf("SSL_CERT_FILE = %q; want the fallback bundle in %s", fb, dir)
	}
}

func TestInstallRejectsNonPEM(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x")
	os.WriteFile(p, []byte("not a cert"), 0o644)
	if _, err := Install(p, []string{}, dir, os.Getenv); err == nil {
		t.Fatal("no error for a non-PEM CA file")
	}
}

// TestInstallReplacesAnotherCA: an image snapshotted from a sandbox with
// the credential proxy holds that sandbox's CA, whose key died with its
// sidecar. The next start replaces it rather than trusting both.
func TestInstallReplacesAnotherCA(t *testing.T) {
	dir := t.TempDir()
	oldCA := testCA(t, filepath.Join(dir, mkdir(t, dir, "old")))
	newCA := testCA(t, filepath.Join(dir, mkdir(t, dir, "new")))
	const system = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
	bundle := filepath.Join(dir, "ca-certificates.crt")
	if err := os.WriteFile(bundle, []byte(system), 0o640); err != nil {
		t.Fatal(err)
	}
	getenv := func(string) string { return "" }
	if _, err := Install(oldCA, []string{bundle}, dir, getenv); err != nil {
		t.Fatal(err)
	}
	if _, err := Install(newCA, []string{bundle}, dir, getenv); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(bundle)
	oldPEM, _ := os.ReadFile(oldCA)
	newPEM, _ := os.ReadFile(newCA)
	want := system + beginMark + string(newPEM) + endMark
	if string(got) != want || strings.Contains(string(got), strings.TrimSpace(string(oldPEM))) {
		t.Fatalf("bundle after a new CA =\n%s\nwant\n%s", got, want)
	}
	if st, _ := os.Stat(bundle); st.Mode().Perm() != 0o640 {
		t.Errorf("rewritten bundle mode = %v, want 0640", st.Mode().Perm())
	}

	// Without the credential proxy the block goes, the rest stays.
	changed, err := Remove([]string{bundle, filepath.Join(dir, "absent.crt")})
	if err != nil || len(changed) != 1 {
		t.Fatalf("Remove = %v, %v", changed, err)
	}
	if got, _ := os.ReadFile(bundle); string(got) != system {
		t.Fatalf("bundle after Remove = %q, want %q", got, system)
	}
	if changed, err := Remove([]string{bundle}); err != nil || len(changed) != 0 {
		t.Fatalf("second Remove = %v, %v; want nothing to do", changed, err)
	}
}

func TestStrip(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"a\n", "a\n"},
		{"a\n" + beginMark + "x\n" + endMark, "a\n"},
		{"a\n" + beginMark + "x\n" + endMark + "b\n" + beginMark + "y\n" + endMark + "c\n", "a\nb\nc\n"},
		{"a\n" + beginMark + "cut short", "a\n"},
		{"a # " + beginMark, "a # " + beginMark}, // not at a line start
	} {
		got, marked := strip([]byte(tc.in))
		if string(got) != tc.want || marked != (tc.in != tc.want) {
			t.Errorf("strip(%q) = %q, %v; want %q", tc.in, got, marked, tc.want)
		}
	}
}

func mkdir(t *testing.T, dir, name string) string {
	t.Helper()
	if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
		t.Fatal(err)
	}
	return name
}
