package grammar

import (
	"errors"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

func TestParseCPU(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"1", 1_000_000_000},
		{"500m", 500_000_000},
		{"2.5", 2_500_000_000},
		{"0.1", 100_000_000},
		{"100m", 100_000_000},
		{"1.5m", 1_500_000},
		{"0", 0},
		{"0.0000000001", 1}, // rounded up to one nano-CPU
		{"64", 64_000_000_000},
	} {
		got, err := ParseCPU(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseCPU(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "-1", "-500m", "abc", "1x", "1 m", "m", "1.2.3", "1e3", "10000000000", "99999999999999999999m", "0x10", "+1", "1Mi"} {
		if got, err := ParseCPU(in); !errors.Is(err, runtime.ErrInvalid) {
			t.Errorf("ParseCPU(%q) = %d, %v; want an ErrInvalid error", in, got, err)
		}
	}
}

func TestParseMemory(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"123", 123},
		{"512Mi", 512 << 20},
		{"2Gi", 2 << 30},
		{"1G", 1_000_000_000},
		{"1000k", 1_000_000},
		{"1.5Gi", 3 << 29},
		{"1Ki", 1024},
		{"0.5", 1}, // rounded up to a whole byte
		{"7Ei", 7 << 60},
		{"9E", 9_000_000_000_000_000_000},
	} {
		got, err := ParseMemory(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseMemory(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "-1", "-1Gi", "garbage", "1GB", "1g", "512m", "1K", "Gi", "1..5Gi", "8Ei", "10E", "99999999999999999999", "1e9", " 1Gi"} {
		if got, err := ParseMemory(in); !errors.Is(err, runtime.ErrInvalid) {
			t.Errorf("ParseMemory(%q) = %d, %v; want an ErrInvalid error", in, got, err)
		}
	}
}
