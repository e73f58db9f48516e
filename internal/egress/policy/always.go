package policy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
)

// Default locations of the always-rule files.
const (
	DefaultDenyAlwaysPath  = "/var/egress/rules/deny.always"
	DefaultAllowAlwaysPath = "/var/egress/rules/allow.always"
)

// maxAlwaysFileSize caps how much of a rule file is read.
const maxAlwaysFileSize = 4 << 20

// AlwaysFiles names the operator's rule files. An empty path means no
// file of that kind.
type AlwaysFiles struct {
	Deny  string // patterns denied whatever the user policy says
	Allow string // patterns allowed unless always-denied
}

// DefaultAlwaysFiles returns the standard locations.
func DefaultAlwaysFiles() AlwaysFiles {
	return AlwaysFiles{Deny: DefaultDenyAlwaysPath, Allow: DefaultAllowAlwaysPath}
}

// Always is a loaded, immutable pair of always-rule lists. Patterns take
// the same forms as rule targets (FQDN, *.domain, IP, CIDR).
type Always struct {
	denyRules, allowRules []Rule
	deny, allow           matcher
}

// Equal reports whether a and b hold the same rules (nil is empty).
func (a *Always) Equal(b *Always) bool {
	var ad, aa, bd, ba []Rule
	if a != nil {
		ad, aa = a.denyRules, a.allowRules
	}
	if b != nil {
		bd, ba = b.denyRules, b.allowRules
	}
	return slices.Equal(ad, bd) && slices.Equal(aa, ba)
}

// Deny returns the always-deny rules in file order.
func (a *Always) Deny() []Rule { return append([]Rule(nil), a.denyRules...) }

// Allow returns the always-allow rules in file order.
func (a *Always) Allow() []Rule { return append([]Rule(nil), a.allowRules...) }

// LoadAlways reads both files. A missing file counts as empty; any other
// read error, or a line that is not a valid pattern, fails the load.
func LoadAlways(files AlwaysFiles) (*Always, error) {
	deny, err := loadRuleFile(files.Deny, Deny)
	if err != nil {
		return nil, err
	}
	allow, err := loadRuleFile(files.Allow, Allow)
	if err != nil {
		return nil, err
	}
	return &Always{denyRules: deny, allowRules: allow, deny: compile(deny), allow: compile(allow)}, nil
}

// loadRuleFile reads one pattern per line; blank lines and everything
// from '#' to the end of a line are ignored.
func loadRuleFile(path string, action Action) ([]Rule, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open always-rule file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxAlwaysFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read always-rule file %s: %w", path, err)
	}
	if len(data) > maxAlwaysFileSize {
		return nil, fmt.Errorf("always-rule file %s is larger than %d bytes", path, maxAlwaysFileSize)
	}
	var rules []Rule
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), maxAlwaysFileSize)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		kind, target, prefix, err := ParseTarget(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		rules = append(rules, Rule{Action: action, Target: target, Kind: kind, Prefix: prefix})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("scan always-rule file %s: %w", path, err)
	}
	return rules, nil
}
