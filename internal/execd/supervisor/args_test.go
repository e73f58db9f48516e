package supervisor

import (
	"slices"
	"testing"
)

func TestSplitArgs(t *testing.T) {
	tests := []struct {
		args              []string
		wantFlags, wantEP []string
	}{
		{nil, nil, nil},
		{[]string{"--port", "44772"}, []string{"--port", "44772"}, nil},
		{[]string{"--port", "1", "--", "sh", "-c", "x -- y"}, []string{"--port", "1"}, []string{"sh", "-c", "x -- y"}},
		{[]string{"--", "tail", "-f", "/dev/null"}, []string{}, []string{"tail", "-f", "/dev/null"}},
		{[]string{"-v", "--"}, []string{"-v"}, nil},
		{[]string{"--", "--"}, []string{}, []string{"--"}},
	}
	for _, tt := range tests {
		flags, ep := SplitArgs(tt.args)
		if !slices.Equal(flags, tt.wantFlags) || !slices.Equal(ep, tt.wantEP) {
			t.Errorf("SplitArgs(%q) = %q, %q; want %q, %q", tt.args, flags, ep, tt.wantFlags, tt.wantEP)
		}
	}
}
