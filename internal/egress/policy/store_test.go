package policy

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadAlways(t *testing.T) {
	dir := t.TempDir()
	files := AlwaysFiles{Deny: filepath.Join(dir, "deny.always"), Allow: filepath.Join(dir, "allow.always")}

	a, err := LoadAlways(files)
	if err != nil {
		t.Fatalf("LoadAlways with missing files: %v", err)
	}
	if len(a.Deny())+len(a.Allow()) != 0 {
		t.Errorf("missing files gave rules: %v %v", a.Deny(), a.Allow())
	}
	if _, err := LoadAlways(AlwaysFiles{}); err != nil {
		t.Errorf("LoadAlways with no paths: %v", err)
	}

	writeFile(t, files.Deny, "# operator deny list\n\n  Metadata.Google.Internal.  \n169.254.0.0/16 # link local\n*.evil.com\n")
	writeFile(t, files.Allow, "*.corp.example\n10.0.0.1\n")
	a, err = LoadAlways(files)
	if err != nil {
		t.Fatalf("LoadAlways: %v", err)
	}
	var got []string
	for _, r := range append(a.Deny(), a.Allow()...) {
		got = append(got, string(r.Action)+":"+r.Target)
	}
	want := "deny:metadata.google.internal deny:169.254.0.0/16 deny:*.evil.com allow:*.corp.example allow:10.0.0.1"
	if s := strings.Join(got, " "); s != want {
		t.Errorf("LoadAlways rules = %s; want %s", s, want)
	}

	writeFile(t, files.Allow, "ok.com\nbad target!\n")
	if _, err := LoadAlways(files); err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "allow.always:2") {
		t.Errorf("LoadAlways with a bad line: error %v, want ErrInvalid naming allow.always:2", err)
	}
	if _, err := LoadAlways(AlwaysFiles{Deny: dir}); err == nil {
		t.Error("LoadAlways of a directory: no error")
	}
}

func TestAlwaysPrecedence(t *testing.T) {
	dir := t.TempDir()
	files := AlwaysFiles{Deny: filepath.Join(dir, "deny"), Allow: filepath.Join(dir, "allow")}
	writeFile(t, files.Deny, "blocked.com\n*.both.com\n169.254.169.254\n")
	writeFile(t, files.Allow, "always.com\n*.both.com\n10.0.0.0/8\n169.254.0.0/16\n")
	user := mustParse(t, `{"defaultAction":"deny","egress":[
		{"action":"allow","target":"blocked.com"},
		{"action":"deny","target":"always.com"},
		{"action":"allow","target":"user.com"},
		{"action":"deny","target":"10.1.0.0/16"}]}`)
	s, err := NewStore(user, files)
	if err != nil {
		t.Fatal(err)
	}
	p := s.Current()
	names := []struct {
		host string
		want Action
	}{
		{"blocked.com", Deny}, // always-deny beats a user allow
		{"x.both.com", Deny},  // always-deny beats always-allow
		{"always.com", Allow}, // always-allow beats a user deny
		{"user.com", Allow},   // user rule
		{"other.com", Deny},   // default
	}
	for _, tc := range names {
		if got := p.Decide(tc.host); got != tc.want {
			t.Errorf("Decide(%q) = %s, want %s", tc.host, got, tc.want)
		}
	}
	ips := []struct {
		ip      string
		want    Action
		matched bool
	}{
		{"169.254.169.254", Deny, true}, // always-deny beats always-allow
		{"169.254.1.1", Allow, true},
		{"10.1.2.3", Allow, true}, // always-allow beats the user deny
		{"192.0.2.1", Deny, false},
	}
	for _, tc := range ips {
		got, matched := p.DecideIP(netip.MustParseAddr(tc.ip))
		if got != tc.want || matched != tc.matched {
			t.Errorf("DecideIP(%s) = %s, %v; want %s, %v", tc.ip, got, matched, tc.want, tc.matched)
		}
	}
	if p.Mode() != sandbox.EgressModeEnforcing || len(p.Rules()) != 4 {
		t.Errorf("always-rules leaked into the user policy: mode %s, %d rules", p.Mode(), len(p.Rules()))
	}
	if user.Always() != nil {
		t.Error("NewStore modified the policy passed in")
	}
	// Patching keeps the always-rules.
	next, err := s.Update(context.Background(), func(cur *Policy) (*Policy, error) {
		return cur.Patch([]sandbox.NetworkRule{{Action: "allow", Target: "x.both.com"}})
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := next.Decide("x.both.com"); got != Deny {
		t.Errorf("after Patch, Decide(x.both.com) = %s, want deny (always-deny)", got)
	}
}

func TestStoreUpdate(t *testing.T) {
	ctx := context.Background()
	s, err := NewStore(DenyAll(Options{}), AlwaysFiles{})
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	cancel := s.Subscribe(func(p *Policy) { seen = append(seen, "a:"+p.Mode()) })
	s.Subscribe(func(p *Policy) { seen = append(seen, "b:"+p.Mode()) })

	allowAll := func(*Policy) (*Policy, error) {
		return New(&sandbox.NetworkPolicy{DefaultAction: "allow"}, Options{})
	}
	var applied *Policy
	got, err := s.Update(ctx, allowAll, func(_ context.Context, p *Policy) error {
		applied = p
		if s.Current().Mode() != sandbox.EgressModeDenyAll {
			t.Error("policy swapped before apply returned")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	if applied != got || s.Current() != got || got.Mode() != sandbox.EgressModeAllowAll {
		t.Errorf("Update: applied %p, returned %p, current %p (mode %s)", applied, got, s.Current(), s.Current().Mode())
	}
	if want := "a:allow_all b:allow_all"; strings.Join(seen, " ") != want {
		t.Errorf("subscribers saw %q, want %q", seen, want)
	}

	// A failing apply keeps the old policy and notifies nobody.
	boom := errors.New("nft: operation not permitted")
	_, err = s.Update(ctx, func(*Policy) (*Policy, error) { return DenyAll(Options{}), nil },
		func(context.Context, *Policy) error { return boom })
	if !errors.Is(err, ErrApply) || !errors.Is(err, boom) {
		t.Errorf("Update with failing apply: error %v, want ErrApply wrapping the cause", err)
	}
	if s.Current() != got {
		t.Error("failing apply replaced the policy")
	}
	// A failing change is returned as is.
	_, err = s.Update(ctx, func(cur *Policy) (*Policy, error) {
		return cur.Patch([]sandbox.NetworkRule{{Target: ""}})
	}, nil)
	if !errors.Is(err, ErrInvalid) || errors.Is(err, ErrApply) {
		t.Errorf("Update with invalid change: error %v, want ErrInvalid only", err)
	}
	if len(seen) != 2 {
		t.Errorf("subscribers notified of failed updates: %q", seen)
	}

	cancel()
	if _, err := s.Update(ctx, func(*Policy) (*Policy, error) { return DenyAll(Options{}), nil }, nil); err != nil {
		t.Fatal(err)
	}
	if want := "a:allow_all b:allow_all b:deny_all"; strings.Join(seen, " ") != want {
		t.Errorf("after cancel subscribers saw %q, want %q", seen, want)
	}
}

func TestStoreReload(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	files := AlwaysFiles{Deny: filepath.Join(dir, "deny"), Allow: filepath.Join(dir, "allow")}
	user := mustParse(t, `{"defaultAction":"allow","egress":[{"action":"deny","target":"x.com"}]}`)
	s, err := NewStore(user, files)
	if err != nil {
		t.Fatal(err)
	}
	notified := 0
	s.Subscribe(func(*Policy) { notified++ })
	if s.Current().Decide("evil.com") != Allow {
		t.Fatal("evil.com denied before any always-rule")
	}

	writeFile(t, files.Deny, "evil.com\n")
	if err := s.Reload(ctx, nil); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if s.Current().Decide("evil.com") != Deny || s.Current().Decide("x.com") != Deny || notified != 1 {
		t.Errorf("after Reload: evil.com %s, x.com %s, notified %d; want deny, deny, 1",
			s.Current().Decide("evil.com"), s.Current().Decide("x.com"), notified)
	}

	// Unchanged files apply nothing: the firewall (and what it learned from
	// DNS) is left alone.
	writeFile(t, files.Deny, "# same rule\nevil.com\n")
	if err := s.Reload(ctx, func(context.Context, *Policy) error { t.Error("unchanged Reload applied"); return nil }); err != nil {
		t.Fatalf("Reload unchanged: %v", err)
	}
	if notified != 1 {
		t.Errorf("unchanged Reload notified subscribers (%d)", notified)
	}

	// A bad file keeps the rules in force.
	writeFile(t, files.Deny, "evil.com\nnot valid!\n")
	if err := s.Reload(ctx, nil); err == nil {
		t.Error("Reload with a bad file: no error")
	}
	if s.Current().Decide("evil.com") != Deny || notified != 1 {
		t.Error("failed Reload changed the policy")
	}

	// A failing apply keeps the old always-rules, also for later updates.
	writeFile(t, files.Deny, "")
	if err := s.Reload(ctx, func(context.Context, *Policy) error { return errors.New("no") }); !errors.Is(err, ErrApply) {
		t.Errorf("Reload with failing apply: error %v, want ErrApply", err)
	}
	p, err := s.Update(ctx, func(cur *Policy) (*Policy, error) { return cur.Without([]string{"x.com"}), nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Decide("evil.com") != Deny {
		t.Error("always-rules from a failed Reload were kept")
	}

	writeFile(t, files.Deny, "bad!\n")
	if _, err := NewStore(user, files); err == nil {
		t.Error("NewStore with a bad always file: no error")
	}
}

// Concurrent PATCHes through Update never lose each other's rules, and
// readers always see a complete policy. Run with -race.
func TestStoreConcurrentUpdates(t *testing.T) {
	ctx := context.Background()
	s, err := NewStore(DenyAll(Options{}), AlwaysFiles{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			target := fmt.Sprintf("h%d.example.com", i)
			if _, err := s.Update(ctx, func(cur *Policy) (*Policy, error) {
				return cur.Patch([]sandbox.NetworkRule{{Action: "allow", Target: target}})
			}, nil); err != nil {
				t.Errorf("Update: %v", err)
			}
		}()
		go func() {
			defer wg.Done()
			_ = s.Current().Decide("h1.example.com")
		}()
	}
	wg.Wait()
	p := s.Current()
	if len(p.Rules()) != n {
		t.Fatalf("after %d concurrent patches: %d rules", n, len(p.Rules()))
	}
	for i := range n {
		if host := fmt.Sprintf("h%d.example.com", i); p.Decide(host) != Allow {
			t.Errorf("Decide(%s) = %s, want allow", host, p.Decide(host))
		}
	}
}
