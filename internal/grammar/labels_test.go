package grammar

import (
	"errors"
	"strings"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

func TestCheckLabel(t *testing.T) {
	tests := []struct {
		key, value string
		ok         bool
	}{
		{"team", "ai", true},
		{"a", "", true},
		{"example.com/team", "a.b-c_d", true},
		{"A-b_c.D", "X1", true},
		{strings.Repeat("k", 63), strings.Repeat("v", 63), true},
		{strings.Repeat("k", 64), "v", false},
		{"k", strings.Repeat("v", 64), false},
		{"", "v", false},
		{"example.com/", "v", false},
		{"/name", "v", false},
		{"Example.com/name", "v", false},
		{"-team", "v", false},
		{"team-", "v", false},
		{"team", "-v", false},
		{"team", "v v", false},
		{"a/b/c", "v", false},
		{"opensandbox.io/x", "v", false},
		{"sub.opensandbox.io/x", "v", false},
		{"notopensandbox.io/x", "v", true},
	}
	for _, tc := range tests {
		err := CheckLabel(tc.key, tc.value)
		if (err == nil) != tc.ok {
			t.Errorf("CheckLabel(%q, %q) = %v, want ok=%v", tc.key, tc.value, err, tc.ok)
		}
		if err != nil && !errors.Is(err, runtime.ErrInvalid) {
			t.Errorf("CheckLabel(%q, %q) = %v, not an ErrInvalid", tc.key, tc.value, err)
		}
	}
	if err := CheckLabel("opensandbox.io/id", "x"); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Errorf("reserved key error = %v, want it to say reserved", err)
	}
}

func TestCheckInstanceID(t *testing.T) {
	for _, id := range []string{"a", "team-a", "0123456789abcdef", strings.Repeat("a", 63)} {
		if err := CheckInstanceID(id); err != nil {
			t.Errorf("CheckInstanceID(%q) = %v", id, err)
		}
	}
	for _, id := range []string{"", "A", "team_a", "-a", "a-", "a.b", strings.Repeat("a", 64)} {
		if err := CheckInstanceID(id); !errors.Is(err, runtime.ErrInvalid) {
			t.Errorf("CheckInstanceID(%q) = %v, want an ErrInvalid error", id, err)
		}
	}
}
