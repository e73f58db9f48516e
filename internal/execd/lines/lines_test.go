package lines

import (
	"reflect"
	"strings"
	"testing"
)

func split(chunks ...string) []string {
	var s Splitter
	var got []string
	emit := func(l []byte) { got = append(got, string(l)) }
	for _, c := range chunks {
		s.Feed([]byte(c), emit)
	}
	s.Flush(emit)
	return got
}

func TestSplitter(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
		want   []string
	}{
		{"lf", []string{"a\nb\n"}, []string{"a", "b"}},
		{"crlf", []string{"a\r\nb\r\n"}, []string{"a", "b"}},
		{"cr", []string{"10%\r20%\r"}, []string{"10%", "20%"}},
		{"blank lines", []string{"a\n\nb\n"}, []string{"a", "\n", "b"}},
		{"partial at end", []string{"a\nb"}, []string{"a", "b"}},
		{"line across chunks", []string{"he", "llo\nwor", "ld\n"}, []string{"hello", "world"}},
		{"crlf across chunks", []string{"a\r", "\nb\n"}, []string{"a", "b"}},
		{"cr then blank", []string{"a\r", "\n\nb"}, []string{"a", "\n", "b"}},
		{"lone cr at end", []string{"a\r"}, []string{"a"}},
		{"empty", nil, nil},
		{"only newline", []string{"\n"}, []string{"\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := split(tt.chunks...); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("split(%q) = %q, want %q", tt.chunks, got, tt.want)
			}
		})
	}
}

func TestSplitterLongLine(t *testing.T) {
	long := strings.Repeat("x", MaxLine*2+10)
	got := split(long[:100], long[100:], "\n")
	if len(got) != 3 || len(got[0]) != MaxLine || len(got[1]) != MaxLine || len(got[2]) != 10 {
		lens := make([]int, len(got))
		for i := range got {
			lens[i] = len(got[i])
		}
		t.Fatalf("long line pieces = %v, want [%d %d 10]", lens, MaxLine, MaxLine)
	}
}

func TestSplitterByteAtATime(t *testing.T) {
	in := "one\r\ntwo\n\nthree\rfour"
	var chunks []string
	for i := range in {
		chunks = append(chunks, in[i:i+1])
	}
	want := []string{"one", "two", "\n", "three", "four"}
	if got := split(chunks...); !reflect.DeepEqual(got, want) {
		t.Errorf("byte-at-a-time split = %q, want %q", got, want)
	}
}
