package files

import (
	"math"
	"strings"
)

// rangeResult is the outcome of parsing a Range header.
type rangeResult int

const (
	rangeIgnore        rangeResult = iota // malformed or multi-range: send the whole file
	rangeOK                               // one satisfiable range
	rangeUnsatisfiable                    // 416
)

// parseRange interprets a single-range "bytes=" header against a file of
// size bytes, returning the first byte and length to send. Following RFC
// 9110, a header that does not parse is ignored rather than rejected.
func parseRange(header string, size int64) (start, length int64, res rangeResult) {
	const unit = "bytes="
	if len(header) < len(unit) || !strings.EqualFold(header[:len(unit)], unit) {
		return 0, 0, rangeIgnore
	}
	spec := strings.TrimSpace(header[len(unit):])
	if strings.Contains(spec, ",") {
		return 0, 0, rangeIgnore
	}
	first, last, ok := strings.Cut(spec, "-")
	if !ok {
		return 0, 0, rangeIgnore
	}
	first, last = strings.TrimSpace(first), strings.TrimSpace(last)
	if first == "" { // suffix: the last n bytes
		n, ok := parseDigits(last)
		if !ok {
			return 0, 0, rangeIgnore
		}
		if n == 0 || size == 0 {
			return 0, 0, rangeUnsatisfiable
		}
		n = min(n, size)
		return size - n, n, rangeOK
	}
	a, ok := parseDigits(first)
	if !ok {
		return 0, 0, rangeIgnore
	}
	b := int64(math.MaxInt64)
	if last != "" {
		if b, ok = parseDigits(last); !ok || b < a {
			return 0, 0, rangeIgnore
		}
	}
	if a >= size {
		return 0, 0, rangeUnsatisfiable
	}
	b = min(b, size-1)
	return a, b - a + 1, rangeOK
}

// parseDigits parses a non-empty run of ASCII digits, saturating at
// MaxInt64 so that huge positions still compare sensibly.
func parseDigits(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	var v int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if v > (math.MaxInt64-d)/10 {
			v = math.MaxInt64
			continue
		}
		v = v*10 + d
	}
	return v, true
}
