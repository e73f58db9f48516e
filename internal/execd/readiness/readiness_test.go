package readiness

import (
	"errors"
	"testing"
)

func TestMatcher(t *testing.T) {
	line := Line("abc123")
	cases := []struct {
		name   string
		writes []string
		want   bool
	}{
		{"whole line", []string{line}, true},
		{"among other output", []string{"hello\nworld ", line, "more\n"}, true},
		{"split byte by byte", splitBytes("noise" + line), true},
		{"split in two", []string{line[:7], line[7:]}, true},
		{"another marker", []string{Line("abc124")}, false},
		{"no newline", []string{line[:len(line)-1]}, false},
		{"prefix of the marker", []string{Line("abc")}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := NewMatcher("abc123")
			seen := false
			for _, w := range c.writes {
				n, err := m.Write([]byte(w))
				if n != len(w) {
					t.Fatalf("Write(%q) = %d, want %d", w, n, len(w))
				}
				if errors.Is(err, ErrSeen) {
					seen = true
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if seen != c.want {
				t.Fatalf("seen = %v, want %v", seen, c.want)
			}
		})
	}
}

func splitBytes(s string) []string {
	out := make([]string, len(s))
	for i := range s {
		out[i] = s[i : i+1]
	}
	return out
}
