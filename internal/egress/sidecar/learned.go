package sidecar

import (
	"net/netip"
	"sync"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/egress/nft"
	"github.com/opensandbox-go/opensandbox/internal/egress/policy"
)

// maxLearned bounds the addresses remembered; beyond it new ones still
// reach the firewall but are not carried over policy changes.
const maxLearned = 1 << 16

// learned remembers which allowed names taught the firewall which
// addresses and until when, so that a policy change (which rebuilds the
// firewall table) carries over the addresses of names it still allows,
// instead of cutting off clients that cache DNS answers.
type learned struct {
	mu     sync.Mutex
	now    func() time.Time
	byAddr map[netip.Addr]map[string]time.Time // address → name → deadline
}

func newLearned() *learned {
	return &learned{now: time.Now, byAddr: map[netip.Addr]map[string]time.Time{}}
}

// add records that name resolved to ips, allowed for timeout.
func (l *learned) add(name string, ips []netip.Addr, timeout time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	deadline := l.now().Add(timeout)
	for _, ip := range ips {
		ip = ip.Unmap()
		names, ok := l.byAddr[ip]
		if !ok {
			if len(l.byAddr) >= maxLearned {
				l.pruneLocked()
				if len(l.byAddr) >= maxLearned {
					continue
				}
			}
			names = map[string]time.Time{}
			l.byAddr[ip] = names
		}
		if deadline.After(names[name]) {
			names[name] = deadline
		}
	}
}

// keep returns the unexpired addresses that p still allows through at
// least one of the names they came from, each with the longest remaining
// timeout among those names.
func (l *learned) keep(p *policy.Policy) []nft.DynamicEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pruneLocked()
	now := l.now()
	var out []nft.DynamicEntry
	for ip, names := range l.byAddr {
		var left time.Duration
		for name, deadline := range names {
			if p.Decide(name) == policy.Allow {
				left = max(left, deadline.Sub(now))
			}
		}
		if left > 0 {
			out = append(out, nft.DynamicEntry{Addr: ip, Timeout: left})
		}
	}
	return out
}

func (l *learned) pruneLocked() {
	now := l.now()
	for ip, names := range l.byAddr {
		for name, deadline := range names {
			if !deadline.After(now) {
				delete(names, name)
			}
		}
		if len(names) == 0 {
			delete(l.byAddr, ip)
		}
	}
}
