// Command coding-agent runs Claude Code in a sandbox that never sees the
// Anthropic API key. The sandbox (image opensandbox/coding-agent) may reach
// only the API host; the key goes into the sandbox's credential vault, held
// by its egress sidecar, which adds it as the x-api-key header to the
// requests the CLI sends there. The CLI itself gets a placeholder. After
// printing the CLI's answer, the program looks for the key everywhere in
// the sandbox (files under /, the environment and command line of every
// process) and fails if it is found.
//
//	OPEN_SANDBOX_DOMAIN=localhost:8080 OPEN_SANDBOX_API_KEY=... \
//	ANTHROPIC_API_KEY=sk-ant-... go run ./examples/coding-agent
//
// Environment:
//
//	ANTHROPIC_API_KEY    the real key (required); it stays on this machine and in the sidecar
//	ANTHROPIC_BASE_URL   the API's base URL, https only (default https://api.anthropic.com)
//	EXAMPLE_IMAGE        the sandbox image (default opensandbox/coding-agent:latest)
//	EXAMPLE_PROMPT       what to ask (default: a one-line arithmetic question)
//
// See README.md next to this file.
package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// keyscan is the program that looks for the key inside the sandbox. It is
// given the key's SHA-256, length and first bytes, never the key.
//
//go:embed keyscan.py
var keyscan []byte

const (
	// placeholder is what the CLI sends as its key; the sidecar replaces
	// the x-api-key header on the wire.
	placeholder = "sk-ant-placeholder-the-vault-injects-the-real-key"
	// caInSandbox is where the server puts the egress sidecar's CA
	// certificate inside a sandbox with the credential proxy.
	caInSandbox = "/opt/opensandbox/egress-ca.pem"
	// sandboxUID is the image's unprivileged user (sandbox, uid 1000).
	sandboxUID = 1000
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	key := os.Getenv("ANTHROPIC_API_KEY")
	if key == "" {
		return errors.New("set ANTHROPIC_API_KEY to your Anthropic API key (it is never sent into the sandbox)")
	}
	if len(key) < 16 {
		return errors.New("ANTHROPIC_API_KEY is too short to be a key")
	}
	baseURL := envOr("ANTHROPIC_BASE_URL", "https://api.anthropic.com")
	u, err := url.Parse(baseURL)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" {
		return fmt.Errorf("ANTHROPIC_BASE_URL %q: want an https URL (the credential proxy adds the key to TLS connections it terminates)", baseURL)
	}
	apiHost := u.Hostname()
	image := envOr("EXAMPLE_IMAGE", "opensandbox/coding-agent:latest")
	prompt := envOr("EXAMPLE_PROMPT", "What is 6 times 7? Reply with the equation and its result only.")

	// NewClient reads OPEN_SANDBOX_DOMAIN (default localhost:8080) and
	// OPEN_SANDBOX_API_KEY from the environment.
	c, err := sandbox.NewClient()
	if err != nil {
		return err
	}
	start := time.Now()
	sb, err := c.Create(ctx, sandbox.CreateOptions{
		Image:   image,
		Timeout: 15 * time.Minute,
		// Nothing but the API host: no package registries, no telemetry.
		NetworkPolicy: &sandbox.NetworkPolicy{DefaultAction: "deny", Egress: []sandbox.NetworkRule{
			{Action: "allow", Target: apiHost},
		}},
		CredentialProxy: true,
	})
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	fmt.Printf("sandbox %s ready in %v (egress: only %s)\n", sb.ID(), time.Since(start).Round(time.Millisecond), apiHost)
	defer func() {
		if err := sb.Kill(context.WithoutCancel(ctx)); err != nil {
			log.Printf("kill: %v", err)
		} else {
			fmt.Println("sandbox killed")
		}
	}()

	// The key goes to the sidecar's vault, over the sidecar's own port:
	// no process inside the sandbox handles it.
	if _, err := sb.CredentialVault().Create(ctx, sandbox.CreateCredentialVaultRequest{
		Credentials: []sandbox.Credential{{Name: "anthropic", Source: sandbox.CredentialSource{Type: "inline", Value: sandbox.Secret(key)}}},
		Bindings: []sandbox.CredentialBinding{{
			Name:  "anthropic-api",
			Match: sandbox.CredentialMatch{Hosts: []string{apiHost}},
			Auth:  sandbox.CredentialAuth{Type: sandbox.CredentialAuthAPIKey, Name: "x-api-key", Credential: "anthropic"},
		}},
	}); err != nil {
		return fmt.Errorf("credential vault: %w", err)
	}
	fmt.Printf("credential vault: x-api-key for https://%s\n", apiHost)

	uid := uint32(sandboxUID)
	start = time.Now()
	ex, err := sb.Run(ctx, `claude -p "$PROMPT"`, sandbox.RunOptions{
		Cwd: "/workspace",
		UID: &uid, GID: &uid,
		Timeout: 5 * time.Minute,
		Env: map[string]string{
			"PROMPT":             prompt,
			"ANTHROPIC_BASE_URL": baseURL,
			"ANTHROPIC_API_KEY":  placeholder,
			// The CLI (a Bun binary) trusts the sidecar's CA, which
			// signs the certificate it sees for the API host.
			"NODE_EXTRA_CA_CERTS": caInSandbox,
			// No telemetry, error reports or update checks: the policy
			// would refuse them anyway.
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
			"DISABLE_AUTOUPDATER":                      "1",
		},
	})
	if err != nil {
		return fmt.Errorf("run claude: %w", err)
	}
	if ex.ExitCode != 0 {
		return fmt.Errorf("claude -p exited %d:\n%s", ex.ExitCode, strings.TrimSpace(ex.Text()+"\n"+joinLines(ex.Stderr)))
	}
	fmt.Printf("claude -p %q answered in %v:\n%s\n", prompt, time.Since(start).Round(time.Millisecond), ex.Text())

	return scanForKey(ctx, sb, key)
}

// scanForKey runs keyscan.py in the sandbox as root, looking for the key
// and for a canary the program writes into the sandbox first: finding the
// canary shows that the scan does find what is there.
func scanForKey(ctx context.Context, sb *sandbox.Sandbox, key string) error {
	canary := "canary-" + rand.Text()
	const canaryFile, script = "/tmp/coding-agent-canary.txt", "/tmp/keyscan.py"
	if err := sb.WriteFile(ctx, canaryFile, []byte(canary+"\n"), sandbox.WriteOptions{}); err != nil {
		return fmt.Errorf("write canary: %w", err)
	}
	if err := sb.WriteFile(ctx, script, keyscan, sandbox.WriteOptions{}); err != nil {
		return fmt.Errorf("write keyscan.py: %w", err)
	}
	root := uint32(0)
	start := time.Now()
	ex, err := sb.Run(ctx, "python3 "+script, sandbox.RunOptions{
		UID: &root, GID: &root, Timeout: 5 * time.Minute,
		Env: map[string]string{"SCAN_TARGETS": target("key", key, 6) + "," + target("canary", canary, 7)},
	})
	if err != nil {
		return fmt.Errorf("run keyscan.py: %w", err)
	}
	if ex.ExitCode != 0 || len(ex.Stdout) == 0 {
		return fmt.Errorf("keyscan.py exited %d: %s", ex.ExitCode, joinLines(ex.Stderr))
	}
	var res struct {
		Files, Processes, Unreadable int
		Found                        map[string][]string
	}
	if err := json.Unmarshal([]byte(ex.Stdout[len(ex.Stdout)-1].Text), &res); err != nil {
		return fmt.Errorf("keyscan.py output: %w", err)
	}
	fmt.Printf("key scan: %d files under /, environment and command line of %d processes (%d files unreadable) in %v\n",
		res.Files, res.Processes, res.Unreadable, time.Since(start).Round(time.Millisecond))
	if len(res.Found["canary"]) == 0 {
		return fmt.Errorf("the scan did not find the canary in %s: it cannot be trusted", canaryFile)
	}
	fmt.Printf("key scan: canary found in %s\n", strings.Join(res.Found["canary"], ", "))
	if where := res.Found["key"]; len(where) > 0 {
		return fmt.Errorf("key scan: the API key IS inside the sandbox: %s", strings.Join(where, ", "))
	}
	fmt.Println("key scan: API key found nowhere in the sandbox")
	return nil
}

// target describes secret to keyscan.py by its SHA-256, its length and its
// first n bytes ("sk-ant" for an Anthropic key, which every key starts with).
func target(name, secret string, n int) string {
	sum := sha256.Sum256([]byte(secret))
	return fmt.Sprintf("%s:%s:%d:%s", name, hex.EncodeToString(sum[:]), len(secret), hex.EncodeToString([]byte(secret[:n])))
}

func joinLines(ls []sandbox.OutputLine) string {
	var b strings.Builder
	for _, l := range ls {
		b.WriteString(l.Text)
		b.WriteByte('\n')
	}
	return strings.TrimSpace(b.String())
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
