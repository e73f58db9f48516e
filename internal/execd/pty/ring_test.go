package pty

import (
	"strings"
	"testing"
)

func TestRing(t *testing.T) {
	tests := []struct {
		name    string
		size    int
		writes  []string
		since   int64
		wantOff int64
		want    string
	}{
		{"empty", 8, nil, 0, 0, ""},
		{"all", 8, []string{"abc", "de"}, 0, 0, "abcde"},
		{"middle", 8, []string{"abc", "de"}, 2, 2, "cde"},
		{"past end", 8, []string{"abc"}, 10, 3, ""},
		{"exactly full", 4, []string{"ab", "cd"}, 0, 0, "abcd"},
		{"wrapped", 4, []string{"abc", "def"}, 0, 2, "cdef"},
		{"wrapped middle", 4, []string{"abc", "def"}, 3, 3, "def"},
		{"wrapped twice", 4, []string{"abc", "def", "ghi"}, 6, 6, "ghi"},
		{"write larger than ring", 4, []string{"a", "bcdefghij"}, 0, 6, "ghij"},
		{"many small", 3, strings.Split("abcdefghij", ""), 5, 7, "hij"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRing(tt.size)
			var total int64
			for _, w := range tt.writes {
				r.write([]byte(w))
				total += int64(len(w))
			}
			if r.total != total {
				t.Errorf("total = %d, want %d", r.total, total)
			}
			off, got := r.since(tt.since)
			if off != tt.wantOff || string(got) != tt.want {
				t.Errorf("since(%d) = (%d, %q), want (%d, %q)", tt.since, off, got, tt.wantOff, tt.want)
			}
		})
	}
}
