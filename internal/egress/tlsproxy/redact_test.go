package tlsproxy

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestRedactingBodyAcrossReads(t *testing.T) {
	secret := "s3cr3t-token-value"
	body := strings.Repeat("x", 40000) + secret + "mid" + secret[:5] + "|" + secret + "end"
	// OneByteReader splits every secret across reads.
	for name, src := range map[string]io.Reader{
		"whole":    strings.NewReader(body),
		"one byte": iotest.OneByteReader(strings.NewReader(body)),
		"half":     iotest.HalfReader(strings.NewReader(body)),
	} {
		got, err := io.ReadAll(newRedactingBody(io.NopCloser(src), []string{secret, "Bearer " + secret}))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := strings.ReplaceAll(body, secret, strings.Repeat("*", len(secret)))
		if string(got) != want {
			t.Fatalf("%s: redacted body differs (len %d vs %d); secret present: %v", name, len(got), len(want), strings.Contains(string(got), secret))
		}
	}
}

func TestRedactingBodyKeepsErrors(t *testing.T) {
	r := newRedactingBody(io.NopCloser(iotest.TimeoutReader(strings.NewReader("abcdefgh"))), []string{"zz"})
	if _, err := io.ReadAll(r); err != iotest.ErrTimeout {
		t.Fatalf("err = %v; want the source's error", err)
	}
}

// TestRedactingBodyReleasesHarmlessTail checks that a chunk ending in bytes
// that cannot start a secret is released at once (interactive streams).
func TestRedactingBodyReleasesHarmlessTail(t *testing.T) {
	pr, pw := io.Pipe()
	r := newRedactingBody(pr, []string{"secret-value"})
	go pw.Write([]byte("hello world")) // no more data follows for now
	buf := make([]byte, 64)
	n, err := io.ReadAtLeast(r, buf, len("hello world"))
	if err != nil || string(buf[:n]) != "hello world" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	go func() {
		pw.Write([]byte("abc secr")) // could be the start of the secret: held
		pw.Write([]byte("et-value!"))
		pw.Close()
	}()
	rest, _ := io.ReadAll(r)
	if string(rest) != "abc ************!" {
		t.Fatalf("rest = %q", rest)
	}
}

// TestRedactingBodyNestedSecrets: when one secret contains another (two
// credentials, or a value and a form of it), the longer is masked whole,
// however the body is cut: masking the shorter first, or masking it in the
// held tail, used to break the longer one's match and show its rest.
func TestRedactingBodyNestedSecrets(t *testing.T) {
	needles := []string{"abc", "abcdef-123", "f-1", "zz-abc"}
	body := "<abcdef-123> <abc> <zz-abcdef-123> <f-1> <abcdef-12"
	want := "<**********> <***> <*************> <***> <***de***2"
	for name, src := range map[string]func() io.Reader{
		"whole":    func() io.Reader { return strings.NewReader(body) },
		"one byte": func() io.Reader { return iotest.OneByteReader(strings.NewReader(body)) },
		"half":     func() io.Reader { return iotest.HalfReader(strings.NewReader(body)) },
	} {
		got, err := io.ReadAll(newRedactingBody(io.NopCloser(src()), needles))
		if err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", name, got, err, want)
		}
	}
}
