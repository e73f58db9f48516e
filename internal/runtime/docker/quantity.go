package docker

import (
	"fmt"
	"math/big"
	"strings"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// ParseCPU turns a Kubernetes-style CPU quantity ("500m", "1", "2.5")
// into nano-CPUs (1e9 = one core). Fractions finer than one nano-CPU are
// rounded up.
func ParseCPU(s string) (int64, error) {
	num, unit := splitQuantity(s)
	var mult int64
	switch unit {
	case "":
		mult = 1_000_000_000
	case "m":
		mult = 1_000_000
	default:
		return 0, fmt.Errorf("cpu %q: unknown unit %q (want none or m): %w", s, unit, runtime.ErrInvalid)
	}
	n, err := scale(num, mult)
	if err != nil {
		return 0, fmt.Errorf("cpu %q: %w", s, err)
	}
	return n, nil
}

// memoryUnits are the Kubernetes quantity suffixes for bytes.
var memoryUnits = map[string]int64{
	"":   1,
	"k":  1e3,
	"M":  1e6,
	"G":  1e9,
	"T":  1e12,
	"P":  1e15,
	"E":  1e18,
	"Ki": 1 << 10,
	"Mi": 1 << 20,
	"Gi": 1 << 30,
	"Ti": 1 << 40,
	"Pi": 1 << 50,
	"Ei": 1 << 60,
}

// ParseMemory turns a Kubernetes-style memory quantity ("512Mi", "2Gi",
// "1G", "1000k", "123") into bytes, rounding fractions of a byte up.
func ParseMemory(s string) (int64, error) {
	num, unit := splitQuantity(s)
	mult, ok := memoryUnits[unit]
	if !ok {
		return 0, fmt.Errorf("memory %q: unknown unit %q (want k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei or none): %w", s, unit, runtime.ErrInvalid)
	}
	n, err := scale(num, mult)
	if err != nil {
		return 0, fmt.Errorf("memory %q: %w", s, err)
	}
	return n, nil
}

// splitQuantity splits "2.5Gi" into "2.5" and "Gi".
func splitQuantity(s string) (num, unit string) {
	i := strings.LastIndexAny(s, "0123456789.") + 1
	return s[:i], s[i:]
}

// scale returns ceil(num * mult) for a plain non-negative decimal num.
func scale(num string, mult int64) (int64, error) {
	digits, dot := 0, 0
	for _, c := range num {
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c == '.':
			dot++
		default:
			return 0, fmt.Errorf("%q is not a non-negative decimal number: %w", num, runtime.ErrInvalid)
		}
	}
	if digits == 0 || dot > 1 {
		return 0, fmt.Errorf("%q is not a non-negative decimal number: %w", num, runtime.ErrInvalid)
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Errorf("%q is not a decimal number: %w", num, runtime.ErrInvalid)
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return 0, fmt.Errorf("%q is too large: %w", num, runtime.ErrInvalid)
	}
	return q.Int64(), nil
}
