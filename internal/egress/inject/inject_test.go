package inject

import (
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

const secret = "s3cr&t/v=1 \"x\""

func plan(in Surface) *Plan {
	return &Plan{Substitutions: []Substitution{{Placeholder: "{{KEY}}", Value: secret, In: in}}}
}

func TestRewritePathAndQuery(t *testing.T) {
	p := plan(InPath | InQuery)
	// As written, and as a client percent-encodes the braces.
	for _, path := range []string{"/v1/{{KEY}}/x", "/v1/%7B%7BKEY%7D%7D/x"} {
		if got, want := must(p.RewritePath(path)), "/v1/s3cr&t%2Fv=1%20%22x%22/x"; got != want {
			t.Errorf("RewritePath(%q) = %q, want %q (a value cannot add a segment)", path, got, want)
		}
	}
	for _, q := range []string{"a=1&key={{KEY}}", "a=1&key=%7B%7BKEY%7D%7D"} {
		if got, want := must(p.RewriteQuery(q)), "a=1&key=s3cr%26t%2Fv%3D1+%22x%22"; got != want {
			t.Errorf("RewriteQuery(%q) = %q, want %q (a value cannot add a parameter)", q, got, want)
		}
	}
	// Surfaces not listed are left alone.
	if got := must(plan(InHeader).RewritePath("/{{KEY}}")); got != "/{{KEY}}" {
		t.Errorf("path without InPath = %q, want unchanged", got)
	}
	var nilPlan *Plan
	if got := must(nilPlan.RewriteQuery("k={{KEY}}")); got != "k={{KEY}}" {
		t.Errorf("nil plan rewrote the query: %q", got)
	}
}

func TestRewriteHeaders(t *testing.T) {
	h := http.Header{
		"X-Api-Key":      {"{{KEY}}"},
		"Cookie":         {"a=1; t={{KEY}}; b={{KEY}}"},
		"Content-Type":   {"text/{{KEY}}"},
		"Content-Length": {"7"},
	}
	if err := plan(InHeader).RewriteHeaders(h); err != nil {
		t.Fatal(err)
	}
	if h.Get("X-Api-Key") != secret || h.Get("Cookie") != "a=1; t="+secret+"; b="+secret {
		t.Errorf("headers not substituted: %q, %q", h.Get("X-Api-Key"), h.Get("Cookie"))
	}
	if h.Get("Content-Type") != "text/{{KEY}}" || h.Get("Content-Length") != "7" {
		t.Errorf("framing headers changed: %v", h)
	}
	h = http.Header{"X-Api-Key": {"{{KEY}}"}}
	if err := plan(InBody).RewriteHeaders(h); err != nil {
		t.Fatal(err)
	}
	if h.Get("X-Api-Key") != "{{KEY}}" {
		t.Errorf("header substituted without InHeader")
	}
}

func TestBodyRewriter(t *testing.T) {
	body := `{"key":"{{KEY}}","n":"{{KEY}}"}`
	for _, tt := range []struct {
		name, ctype, encoding string
		in, want              string // want "" = not rewritten
	}{
		{"json", "application/json; charset=utf-8", "", body, `{"key":"s3cr\u0026t/v=1 \"x\"","n":"s3cr\u0026t/v=1 \"x\""}`},
		{"json suffix", "application/vnd.api+json", "", `["{{KEY}}"]`, `["s3cr\u0026t/v=1 \"x\""]`},
		{"form", "application/x-www-form-urlencoded", "", "a=1&k={{KEY}}&j=%7B%7BKEY%7D%7D", "a=1&k=s3cr%26t%2Fv%3D1+%22x%22&j=s3cr%26t%2Fv%3D1+%22x%22"},
		{"text", "text/plain", "", "k {{KEY}}", "k " + secret},
		{"no type", "", "", "{{KEY}}", secret},
		{"identity encoding", "text/plain", "identity", "{{KEY}}", secret},
		{"gzip", "application/json", "gzip", body, ""},
		{"multipart", "multipart/form-data; boundary=x", "", "--x\r\n\r\n{{KEY}}\r\n--x--", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.ctype != "" {
				h.Set("Content-Type", tt.ctype)
			}
			if tt.encoding != "" {
				h.Set("Content-Encoding", tt.encoding)
			}
			wrap := plan(InBody).BodyRewriter(h)
			if tt.want == "" {
				if wrap != nil {
					t.Fatalf("body would be rewritten; want it left alone")
				}
				return
			}
			if wrap == nil {
				t.Fatal("body not rewritten")
			}
			got, err := io.ReadAll(wrap(strings.NewReader(tt.in)))
			if err != nil || string(got) != tt.want {
				t.Errorf("body = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	if plan(InHeader).BodyRewriter(http.Header{}) != nil {
		t.Errorf("body rewriter without InBody")
	}
}

// TestReplaceReaderBoundaries feeds the stream in pieces of every size so
// that placeholders straddle reads, and compares with the one-shot result.
func TestReplaceReaderBoundaries(t *testing.T) {
	ps := []pair{{"{{LONGER}}", "L"}, {"{{K}}", "value-of-k"}, {"ab", "X"}}
	in := strings.Repeat("x{{K}}y{{LONG{{LONGER}}a{{Kab{{K}}{{K}", 50) + "{{K"
	want, _ := replaceAll(in, ps, len(in)*10)
	if !strings.Contains(want, "value-of-k") || strings.Contains(want, "{{K}}") || !strings.HasSuffix(want, "{{K") {
		t.Fatalf("replaceAll = %q", want)
	}
	for _, size := range []int{1, 2, 3, 7, 64, 1 << 20} {
		r := newReplaceReader(&chunkReader{data: []byte(in), size: size}, ps)
		got, err := io.ReadAll(r)
		if err != nil || string(got) != want {
			t.Errorf("chunks of %d: got %d bytes (%v), want %d; differ", size, len(got), err, len(want))
		}
	}
	got, err := io.ReadAll(newReplaceReader(iotest.OneByteReader(strings.NewReader(in)), ps))
	if err != nil || string(got) != want {
		t.Errorf("one byte at a time: differ (%v)", err)
	}
	if err := iotest.TestReader(newReplaceReader(strings.NewReader(in), ps), []byte(want)); err != nil {
		t.Error(err)
	}
}

// TestReplaceReaderBoundedMemory streams 16 MiB through the reader and
// checks that it never holds more than a read and a placeholder.
func TestReplaceReaderBoundedMemory(t *testing.T) {
	const total = 16 << 20
	src := io.LimitReader(repeatReader("0123456789{{K}}-"), total)
	r := newReplaceReader(src, []pair{{"{{K}}", "kk"}})
	buf := make([]byte, 8<<10)
	n := 0
	for {
		m, err := r.Read(buf)
		n += m
		if c := cap(r.in); c > 2*readChunk {
			t.Fatalf("input buffer grew to %d bytes", c)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if want := total / 16 * 13; n != want {
		t.Errorf("streamed %d bytes, want %d", n, want)
	}
}

func TestSecrets(t *testing.T) {
	p := &Plan{Headers: http.Header{"Authorization": {"Bearer tok-123456789"}}, Substitutions: plan(InBody).Substitutions}
	got := p.Secrets()
	for _, want := range []string{"Bearer tok-123456789", "tok-123456789", secret, "s3cr%26t%2Fv%3D1+%22x%22", "s3cr&t%2Fv=1%20%22x%22", `s3cr\u0026t/v=1 \"x\"`} {
		if !slices.Contains(got, want) {
			t.Errorf("Secrets() lacks %q", want)
		}
	}
	var nilPlan *Plan
	if nilPlan.Secrets() != nil || nilPlan.Clone() != nil {
		t.Errorf("nil plan has secrets or a clone")
	}
	c := p.Clone()
	c.Headers.Set("Authorization", "x")
	c.Substitutions[0].Value = "y"
	if p.Headers.Get("Authorization") == "x" || p.Substitutions[0].Value == "y" {
		t.Errorf("Clone shares storage")
	}
}

// TestSubstitutionGrowthBounded: a sandbox that repeats a short
// placeholder cannot make a long secret fill the proxy's memory. The
// request head may grow by at most MaxHeadGrowth, and the streaming body
// reader holds about one read of output at a time, whatever the expansion.
func TestSubstitutionGrowthBounded(t *testing.T) {
	big := strings.Repeat("v", 1<<10)
	p := &Plan{Substitutions: []Substitution{{Placeholder: "X", Value: big, In: InPath | InQuery | InHeader | InBody}}}
	many := strings.Repeat("X", 16<<10) // 16 MiB once substituted
	if _, err := p.RewritePath("/" + many); !errors.Is(err, ErrTooLarge) {
		t.Errorf("RewritePath of 16 MiB: %v; want ErrTooLarge", err)
	}
	if _, err := p.RewriteQuery("k=" + many); !errors.Is(err, ErrTooLarge) {
		t.Errorf("RewriteQuery of 16 MiB: %v; want ErrTooLarge", err)
	}
	// Each header alone stays under the bound, together they do not.
	h := http.Header{"A": {many[:200]}, "B": {many[:200]}}
	if err := p.RewriteHeaders(h); !errors.Is(err, ErrTooLarge) {
		t.Errorf("RewriteHeaders of 2 x 200 KiB: %v; want ErrTooLarge", err)
	}
	if got, err := p.RewritePath("/X/X"); err != nil || got != "/"+big+"/"+big {
		t.Errorf("RewritePath within the bound = %.20q..., %v", got, err)
	}
	h = http.Header{"A": {"X"}}
	if err := p.RewriteHeaders(h); err != nil || h.Get("A") != big {
		t.Errorf("RewriteHeaders within the bound: %v", err)
	}

	r := newReplaceReader(strings.NewReader(many), p.pairs(InBody, literal, identity))
	buf := make([]byte, 512)
	n := 0
	for {
		m, err := r.Read(buf)
		n += m
		if held := len(r.out) + m; held > readChunk+len(big) {
			t.Fatalf("the reader held %d bytes of output", held)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if n != len(many)*len(big) {
		t.Errorf("streamed %d bytes, want %d", n, len(many)*len(big))
	}
}

func must(s string, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return s
}

type chunkReader struct {
	data []byte
	size int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), c.size, len(c.data))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

type repeatReader string

func (r repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		n += copy(p[n:], r)
	}
	return n, nil
}

// TestReplaceLinearTime: many placeholders and many substitutions that do
// not occur must not make a scan quadratic. Every pair is searched for
// from where the last search for it ended, so the bytes searched are about
// the input's length per pair, not per occurrence.
func TestReplaceLinearTime(t *testing.T) {
	ps := []pair{{"X", "v"}}
	for i := range 40 {
		ps = append(ps, pair{"{{ABSENT" + strings.Repeat("_", i) + "}}", "a"})
	}
	in := []byte(strings.Repeat("X", 64<<10))
	m := newMatcher(in, ps)
	for from, n := 0, 0; ; n++ {
		at, which := m.next(from)
		if at < 0 {
			if n != len(in) {
				t.Fatalf("%d matches, want %d", n, len(in))
			}
			break
		}
		from = at + len(ps[which].old)
	}
	if limit := 2 * len(ps) * len(in); m.searched > limit {
		t.Errorf("searched %d bytes for %d pairs in %d bytes; want at most %d", m.searched, len(ps), len(in), limit)
	}
}

// TestReplaceReaderNestedPlaceholders: when one placeholder begins (or
// ends inside) another, a stream cut anywhere gives what the whole input
// gives: the longer, earlier placeholder wins even when its end has not
// arrived yet.
func TestReplaceReaderNestedPlaceholders(t *testing.T) {
	ps := []pair{{"$AWS_KEY_ID", "id"}, {"{{ABCDE}}", "long"}, {"$AWS_KEY", "key"}, {"BCD", "short"}}
	in := strings.Repeat("a=$AWS_KEY_ID b=$AWS_KEY c={{ABCDE}} d=BCD e={{ABC ", 20)
	want, _ := replaceAll(in, ps, len(in)*10)
	for size := 1; size <= 64; size++ {
		got, err := io.ReadAll(newReplaceReader(&chunkReader{data: []byte(in), size: size}, ps))
		if err != nil || string(got) != want {
			t.Fatalf("chunks of %d:\n got %q\nwant %q", size, got, want)
		}
	}
}
