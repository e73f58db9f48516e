package hostname

import "testing"

func TestCanonical(t *testing.T) {
	for in, want := range map[string]string{
		"API.Example.com.": "api.example.com",
		"api.example.com":  "api.example.com",
		"*.Wild.TEST.":     "*.wild.test",
		"10.0.0.1":         "10.0.0.1",
		"fd00::A":          "fd00::a",
		".":                "",
		"":                 "",
		"a..":              "a.", // only the root's dot goes
	} {
		if got := Canonical(in); got != want {
			t.Errorf("Canonical(%q) = %q, want %q", in, got, want)
		}
	}
}
