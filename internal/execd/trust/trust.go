// Package trust adds the egress sidecar's per-sandbox CA to the trust
// stores of whatever image the sandbox runs, so HTTPS clients inside accept
// the credential proxy's certificates without any change to user code.
//
// The CA is appended to every system bundle that exists (Debian, Alpine,
// RHEL, SUSE layouts) between two marker comment lines, once: a bundle
// already holding it is left alone, so a restarted execd adds nothing. A
// marked block holding another CA (an image snapshotted from a sandbox
// whose sidecar, and so whose CA key, is gone) is replaced, and Remove
// strips such blocks from a sandbox without the credential proxy. When no
// bundle can be written (an image running as a non-root user), a combined
// bundle is written to a temporary file instead. Either way the environment
// variables that Python requests, curl, OpenSSL and Node read are pointed
// at a bundle holding the CA, unless the image already sets them.
package trust

import (
	"bytes"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// SystemBundles are the CA bundle files of common distributions, most
// common first.
var SystemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt", // Debian, Ubuntu, Alpine
	"/etc/pki/tls/certs/ca-bundle.crt",   // RHEL, Fedora
	"/etc/ssl/ca-bundle.pem",             // SUSE
	"/etc/ssl/cert.pem",                  // Alpine, macOS-like layouts
}

// bundleEnv are the variables pointed at the updated bundle.
var bundleEnv = []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"}

// Result says what Install did.
type Result struct {
	// Updated are the bundles the CA was appended to (or already in).
	Updated []string
	// Env are the variables to add to the environment of every process.
	Env map[string]string
	// Errors are the bundles that exist but could not be updated; clients
	// reading only those will not trust the CA.
	Errors []error
}

// Install adds the certificates of caFile to the bundles (SystemBundles
// when nil), writing a fallback bundle into tmpDir when none is writable.
// getenv decides which variables are already set by the image.
func Install(caFile string, bundles []string, tmpDir string, getenv func(string) string) (Result, error) {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return Result{}, fmt.Errorf("trust: read CA: %w", err)
	}
	if blk, _ := pem.Decode(ca); blk == nil || blk.Type != "CERTIFICATE" {
		return Result{}, fmt.Errorf("trust: %s holds no PEM certificate", caFile)
	}
	ca = append(bytes.TrimSpace(ca), '\n')
	block := append(append([]byte(beginMark), ca...), endMark...)
	if bundles == nil {
		bundles = SystemBundles
	}
	var (
		res      Result
		readable []byte
		errs     []error
		trusted  = map[string]bool{} // real files that now hold the CA
	)
	for _, f := range readBundles(bundles) {
		b, real, cur := f.name, f.real, f.cur
		if f.dup {
			// Another name of a file handled above: updated only if it was.
			if trusted[real] {
				res.Updated = append(res.Updated, b)
			}
			continue
		}
		rest, marked := strip(cur)
		if readable == nil {
			readable = rest
		}
		want := append(withNewline(bytes.Clone(rest)), block...)
		if len(rest) == 0 {
			want = block
		}
		switch {
		case bytes.Equal(cur, want):
		case !marked:
			err = appendFile(real, cur, block)
		default:
			err = replaceFile(real, want)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		trusted[real] = true
		res.Updated = append(res.Updated, b)
	}
	res.Errors = errs
	target := ""
	if len(res.Updated) > 0 {
		target = res.Updated[0]
	} else {
		target = filepath.Join(tmpDir, "opensandbox-ca-bundle.pem")
		if err := os.WriteFile(target, append(withNewline(readable), block...), 0o644); err != nil {
			return Result{}, errors.Join(append(errs, fmt.Errorf("trust: write fallback bundle: %w", err))...)
		}
	}
	res.Env = map[string]string{}
	for _, k := range bundleEnv {
		if getenv(k) == "" {
			res.Env[k] = target
		}
	}
	if getenv("NODE_EXTRA_CA_CERTS") == "" {
		res.Env["NODE_EXTRA_CA_CERTS"] = caFile
	}
	return res, nil
}

// The lines around the CA in a bundle. Only whole lines starting
// "-----BEGIN" mean anything to PEM readers (OpenSSL, Go, Python, Node), so
// the markers are ignored by them, as the comments of RHEL's bundle are.
const (
	beginMark = "# BEGIN OpenSandbox egress CA (added at sandbox start; do not edit)\n"
	endMark   = "# END OpenSandbox egress CA\n"
)

// Remove strips the marked egress CA blocks from the bundles
// (SystemBundles when nil): a sandbox without the credential proxy,
// started from an image snapshotted from one with it, must not keep
// trusting a CA that no longer guards anything. It returns the bundles it
// changed; bundles it could not rewrite are errors.
func Remove(bundles []string) (changed []string, err error) {
	if bundles == nil {
		bundles = SystemBundles
	}
	var errs []error
	for _, f := range readBundles(bundles) {
		rest, marked := strip(f.cur)
		if f.dup || !marked {
			continue
		}
		if err := replaceFile(f.real, rest); err != nil {
			errs = append(errs, err)
			continue
		}
		changed = append(changed, f.name)
	}
	return changed, errors.Join(errs...)
}

// bundleFile is one bundle that exists in the image: the name it was
// listed under, the file it resolves to and its content. dup marks a name
// resolving to a file listed earlier (symlinked layouts).
type bundleFile struct {
	name, real string
	cur        []byte
	dup        bool
}

// readBundles reads the bundles that exist and can be read, in order.
func readBundles(bundles []string) []bundleFile {
	var out []bundleFile
	seen := map[string]bool{}
	for _, b := range bundles {
		real, err := filepath.EvalSymlinks(b)
		if err != nil {
			continue // absent in this image
		}
		if seen[real] {
			out = append(out, bundleFile{name: b, real: real, dup: true})
			continue
		}
		cur, err := os.ReadFile(real)
		if err != nil {
			continue
		}
		seen[real] = true
		out = append(out, bundleFile{name: b, real: real, cur: cur})
	}
	return out
}

// strip returns b without its marked blocks, and whether it had any. A
// block cut short (execd died while appending) runs to the end of b.
func strip(b []byte) ([]byte, bool) {
	var out []byte
	marked := false
	for {
		i := markIndex(b, beginMark)
		if i < 0 {
			if !marked {
				return b, false
			}
			return append(out, b...), true
		}
		marked = true
		out = append(out, b[:i]...)
		rest := b[i+len(beginMark):]
		j := markIndex(rest, endMark)
		if j < 0 {
			return out, true
		}
		b = rest[j+len(endMark):]
	}
}

// markIndex finds mark at the start of a line of b.
func markIndex(b []byte, mark string) int {
	off := 0
	for {
		i := bytes.Index(b[off:], []byte(mark))
		if i < 0 {
			return -1
		}
		if at := off + i; at == 0 || b[at-1] == '\n' {
			return at
		}
		off += i + 1
	}
}

// replaceFile gives path the content b: through a temporary file and a
// rename when its directory is writable (never a half-written bundle),
// else in place.
func replaceFile(path string, b []byte) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("trust: %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".opensandbox-bundle-*")
	if err == nil {
		name := tmp.Name()
		_, werr := tmp.Write(b)
		if werr == nil {
			werr = tmp.Chmod(st.Mode().Perm())
		}
		if cerr := tmp.Close(); werr == nil {
			werr = cerr
		}
		if werr == nil {
			werr = os.Rename(name, path)
		}
		if werr == nil {
			return nil
		}
		os.Remove(name)
	}
	if err := os.WriteFile(path, b, 0); err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return fmt.Errorf("trust: %s is not writable: %w", path, err)
		}
		return fmt.Errorf("trust: rewrite %s: %w", path, err)
	}
	return nil
}

func appendFile(path string, cur, ca []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		if errors.Is(err, fs.ErrPermission) || errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("trust: %s is not writable: %w", path, err)
		}
		return fmt.Errorf("trust: open %s: %w", path, err)
	}
	defer f.Close()
	if len(cur) > 0 && cur[len(cur)-1] != '\n' {
		ca = append([]byte{'\n'}, ca...)
	}
	if _, err := f.Write(ca); err != nil {
		return fmt.Errorf("trust: append to %s: %w", path, err)
	}
	return nil
}

func withNewline(b []byte) []byte {
	if len(b) > 0 && b[len(b)-1] != '\n' {
		return append(b, '\n')
	}
	return b
}
