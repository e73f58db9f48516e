package lifecycle

import (
	"sync"
	"time"
)

// tokenTTL is how long the proxy trusts a cached execd token. Tokens never
// change during a sandbox's life; the bound only keeps the cache small
// when sandboxes disappear behind the server's back.
const tokenTTL = 5 * time.Minute

// tokenCache remembers execd tokens so that a proxy does not ask the
// engine for one on every request. The zero value is ready to use.
type tokenCache struct {
	mu sync.Mutex
	m  map[string]cachedToken
}

type cachedToken struct {
	token string
	until time.Time
}

func (c *tokenCache) get(id string, now time.Time) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.m[id]
	if !ok || now.After(t.until) {
		return "", false
	}
	return t.token, true
}

func (c *tokenCache) put(id, token string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]cachedToken{}
	}
	if len(c.m) >= 4096 {
		for k, t := range c.m {
			if now.After(t.until) {
				delete(c.m, k)
			}
		}
	}
	c.m[id] = cachedToken{token: token, until: now.Add(tokenTTL)}
}

func (c *tokenCache) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, id)
}
