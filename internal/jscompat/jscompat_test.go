package jscompat

import "testing"

func TestVersionAtLeast(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want bool
	}{
		{"20.18.1", true}, {"20.18.0", false}, {"20.19.0", true}, {"21.0.0", true}, {"19.99.99", false},
		{"20.18.1-rc.1", true}, {"22", true}, {"x.1.1", false},
	} {
		if got := VersionAtLeast(tc.v, 20, 18, 1); got != tc.want {
			t.Errorf("VersionAtLeast(%q) = %v, want %v", tc.v, got, tc.want)
		}
	}
}
