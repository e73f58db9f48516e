package vault

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzCreate feeds arbitrary JSON bodies of POST /credential-vault to the
// store's validation. A body is refused or stored; a stored vault reads
// back without any inline secret, and matching requests against it never
// panics. The seeds run with the unit tests.
func FuzzCreate(f *testing.F) {
	valid, err := json.Marshal(validRequest())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	for _, s := range []string{
		`{}`,
		`{"credentials":[{"name":"a","source":{"type":"inline","value":"v"}}],"bindings":[{"name":"b","match":{"hosts":["*.x.test"],"paths":["/v1/*"],"methods":["GET"]},"auth":{"type":"bearer","credential":"a"}}]}`,
		`{"credentials":[{"name":"a","source":{"type":"inline","value":"v"}}],"bindings":[{"name":"b","match":{"hosts":["[::1]","10.0.0.1"],"schemes":["http"],"ports":[80]},"auth":{"type":"customHeaders","headers":[{"name":"X-A","credential":"a"}]}}]}`,
		`{"credentials":[{"name":"a","source":{"type":"inline","value":"v"}}],"bindings":[{"name":"b","match":{"hosts":["x.test"]},"auth":{"type":"apiKey","name":"X-Key","credential":"a"},"substitutions":[{"placeholder":"__A__","credential":"a"}]}]}`,
		`{"credentials":[{"name":"-","source":{"type":"env","value":"\r\n"}}],"bindings":[{"name":"b","match":{"hosts":["a.*.b"],"ports":[70000],"paths":["x"]},"auth":{"type":"oauth"}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req CreateRequest
		if json.Unmarshal(body, &req) != nil {
			return
		}
		s := NewStore()
		st, err := s.Create(req)
		if err != nil {
			if _, gerr := s.Get(); gerr == nil {
				t.Fatalf("a refused create left a vault: %v", err)
			}
			return
		}
		got, err := s.Get()
		if err != nil {
			t.Fatalf("Get after an accepted create: %v", err)
		}
		for _, v := range []any{st, got} {
			out, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range req.Credentials {
				if val := string(c.Source.Value); len(val) >= 8 && strings.Contains(string(out), val) {
					t.Fatalf("the vault's state shows credential %q's value: %s", c.Name, out)
				}
			}
		}
		for _, b := range req.Bindings {
			for _, h := range b.Match.Hosts {
				host := strings.TrimPrefix(h, "*.")
				s.Match("https", host, 443, "GET", "/")
				s.Match("http", "a."+host, 80, "POST", "/v1/x")
				s.MayMatch("https", host, 443)
			}
		}
	})
}
