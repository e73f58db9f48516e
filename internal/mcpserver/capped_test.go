package mcpserver

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCappedTextUnderLimit(t *testing.T) {
	c := newCappedText(16)
	c.WriteString("hello\n")
	c.WriteString("world\n")
	if got, want := c.String(), "hello\nworld\n"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if c.Truncated() {
		t.Errorf("Truncated() = true for %d of 16 bytes", len("hello\nworld\n"))
	}
}

// TestCappedTextKeepsHeadAndTail checks the cap against a reference: the
// first limit/2 bytes, the last limit-limit/2 bytes and the count of the
// rest, whatever the sizes of the writes.
func TestCappedTextKeepsHeadAndTail(t *testing.T) {
	var all strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&all, "line %d\n", i)
	}
	input := all.String()
	for _, limit := range []int{1, 2, 7, 64, 1000} {
		for _, chunk := range []int{1, 3, 8, 100, 999, len(input)} {
			t.Run(fmt.Sprintf("limit=%d/chunk=%d", limit, chunk), func(t *testing.T) {
				c := newCappedText(limit)
				for s := input; len(s) > 0; {
					n := min(chunk, len(s))
					c.WriteString(s[:n])
					s = s[n:]
				}
				head, tail := input[:limit/2], input[len(input)-(limit-limit/2):]
				dropped := len(input) - limit
				want := fmt.Sprintf("%s\n[... output truncated: %d bytes omitted (limit %d bytes per stream) ...]\n%s", head, dropped, limit, tail)
				if got := c.String(); got != want {
					t.Errorf("String() = %q,\nwant %q", got, want)
				}
				if !c.Truncated() {
					t.Error("Truncated() = false, want true")
				}
			})
		}
	}
}

func TestCappedTextDefaultLimit(t *testing.T) {
	c := newCappedText(0)
	c.WriteString(strings.Repeat("x", DefaultOutputLimit))
	if c.Truncated() {
		t.Fatalf("Truncated() = true at exactly %d bytes", DefaultOutputLimit)
	}
	c.WriteString("y")
	if !c.Truncated() {
		t.Fatalf("Truncated() = false after %d bytes", DefaultOutputLimit+1)
	}
	if got := len(c.String()); got > DefaultOutputLimit+200 {
		t.Errorf("len(String()) = %d, want about %d", got, DefaultOutputLimit)
	}
}

func TestCappedTextValidUTF8(t *testing.T) {
	c := newCappedText(5)
	c.WriteString(strings.Repeat("é", 10)) // two bytes each: the cut splits one
	if got := c.String(); !strings.Contains(got, "\uFFFD") || !utf8.ValidString(got) {
		t.Errorf("String() = %q, want valid UTF-8 with a replacement character", got)
	}
}
