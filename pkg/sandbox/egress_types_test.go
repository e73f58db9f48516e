package sandbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

const testSecret = "sk-test-0123456789-secret"

func TestSecretRedactsWhenPrinted(t *testing.T) {
	s := Secret(testSecret)
	c := Credential{Name: "gh", Source: CredentialSource{Type: CredentialSourceInline, Value: s}}
	req := CreateCredentialVaultRequest{Credentials: []Credential{c}}
	var printed []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%t", "%10.3s", "%-8v"} {
		printed = append(printed, fmt.Sprintf(verb, s), fmt.Sprintf(verb, c), fmt.Sprintf(verb, req))
	}
	printed = append(printed, fmt.Sprint(s), fmt.Sprintln(c), s.String(), s.GoString())
	for _, p := range printed {
		if strings.Contains(p, testSecret) || strings.Contains(p, "sk-test") {
			t.Errorf("formatted value leaks the secret: %q", p)
		}
	}
	if got := fmt.Sprint(s); got != Redacted {
		t.Errorf("fmt.Sprint(secret) = %q, want %q", got, Redacted)
	}
}

func TestSecretRedactsWhenLogged(t *testing.T) {
	s := Secret(testSecret)
	c := Credential{Name: "gh", Source: CredentialSource{Type: CredentialSourceInline, Value: s}}
	rev := int64(3)
	patch := PatchCredentialVaultRequest{ExpectedRevision: &rev, Credentials: &CredentialMutations{Replace: []Credential{c}}}
	create := CreateCredentialVaultRequest{Credentials: []Credential{c}}
	for name, h := range map[string]func(*bytes.Buffer) slog.Handler{
		"text": func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
		"json": func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
	} {
		var buf bytes.Buffer
		log := slog.New(h(&buf))
		log.Info("x", "secret", s, "credential", c, "source", c.Source, "create", create, "patch", patch, "mutations", *patch.Credentials)
		if strings.Contains(buf.String(), testSecret) {
			t.Errorf("%s log leaks the secret: %s", name, buf.String())
		}
		if !strings.Contains(buf.String(), "gh") {
			t.Errorf("%s log lacks the credential name: %s", name, buf.String())
		}
	}
}

func TestSecretMarshalsRealValue(t *testing.T) {
	in := CreateCredentialVaultRequest{Credentials: []Credential{{Name: "gh", Source: CredentialSource{Type: CredentialSourceInline, Value: testSecret}}}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"value":"`+testSecret+`"`) {
		t.Fatalf("json.Marshal = %s, want the real value the sidecar needs", b)
	}
	var out CreateCredentialVaultRequest
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if got := string(out.Credentials[0].Source.Value); got != testSecret {
		t.Errorf("round trip value = %q, want %q", got, testSecret)
	}
	var bad CredentialSource
	err = json.Unmarshal([]byte(`{"type":"inline","value":12}`), &bad)
	if err == nil || !strings.Contains(err.Error(), "string") {
		t.Errorf("Unmarshal of a number value: err = %v, want a type error naming string", err)
	}
}

func TestCreateOptionsEgress(t *testing.T) {
	np := &NetworkPolicy{DefaultAction: "deny", Egress: []NetworkRule{{Action: "allow", Target: "pypi.org"}}}
	b, err := json.Marshal(CreateOptions{Image: "x", NetworkPolicy: np, CredentialProxy: true}.request())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"networkPolicy":{"defaultAction":"deny","egress":[{"action":"allow","target":"pypi.org"}]}`, `"credentialProxy":{"enabled":true}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("create request %s lacks %s", b, want)
		}
	}
	b, _ = json.Marshal(CreateOptions{Image: "x"}.request())
	if strings.Contains(string(b), "credentialProxy") || strings.Contains(string(b), "networkPolicy") {
		t.Errorf("create request without egress options = %s, want neither field", b)
	}
}
