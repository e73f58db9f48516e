package grammar

import (
	"errors"
	"math"
	"regexp"

	"k8s.io/apimachinery/pkg/api/resource"
)

// The documented quantity forms: a plain non-negative decimal and an
// optional suffix. resource.ParseQuantity alone would also take exponents
// ("1e3") and signs, which the API does not promise.
var (
	cpuRE    = regexp.MustCompile(`^[0-9]*\.?[0-9]*m?$`)
	memoryRE = regexp.MustCompile(`^[0-9]*\.?[0-9]*(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$`)
	digitRE  = regexp.MustCompile(`[0-9]`)
)

// The largest quantities the parsers return: their results are int64.
var (
	maxInt64    = resource.NewQuantity(math.MaxInt64, resource.DecimalSI)
	maxNanoCPUs = resource.NewScaledQuantity(math.MaxInt64, resource.Nano)
)

// ParseCPU turns a Kubernetes CPU quantity ("500m", "1", "2.5") into
// nano-CPUs (1e9 = one core). Fractions finer than one nano-CPU are
// rounded up. Errors wrap runtime.ErrInvalid.
func ParseCPU(s string) (int64, error) {
	q, err := parse(s, cpuRE)
	if err != nil {
		return 0, invalid("cpu %q: %v (want a decimal number of cores, optionally with the suffix m)", s, err)
	}
	if q.Cmp(*maxNanoCPUs) > 0 {
		return 0, invalid("cpu %q is too large", s)
	}
	return q.ScaledValue(resource.Nano), nil // rounds up
}

// ParseMemory turns a Kubernetes memory quantity ("512Mi", "2Gi", "1G",
// "1000k", "123") into bytes, rounding fractions of a byte up. Errors wrap
// runtime.ErrInvalid.
func ParseMemory(s string) (int64, error) {
	q, err := parse(s, memoryRE)
	if err != nil {
		return 0, invalid("memory %q: %v (want a decimal number with an optional suffix k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi or Ei)", s, err)
	}
	// ParseQuantity saturates binary quantities at MaxInt64 ("8Ei"
	// comes back as 2^63-1), so reaching it means too large.
	if q.Cmp(*maxInt64) >= 0 {
		return 0, invalid("memory %q is too large", s)
	}
	return q.Value(), nil // rounds up
}

// parse checks s against form and parses it.
func parse(s string, form *regexp.Regexp) (resource.Quantity, error) {
	if !form.MatchString(s) || !digitRE.MatchString(s) {
		return resource.Quantity{}, errors.New("not a quantity")
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return resource.Quantity{}, err
	}
	return q, nil
}
