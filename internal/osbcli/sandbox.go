package osbcli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func (a *app) sandboxCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "sandbox",
		Aliases: []string{"sb"},
		Short:   "Create, list and manage sandboxes",
	}
	cmd.AddCommand(
		a.sandboxCreateCommand(),
		a.sandboxListCommand(),
		a.sandboxGetCommand(),
		a.sandboxKillCommand(),
		a.sandboxPauseCommand(),
		a.sandboxResumeCommand(),
		a.sandboxRenewCommand(),
		a.sandboxEndpointCommand(),
		a.sandboxForwardCommand(),
		a.sandboxHealthCommand(),
		a.sandboxMetricsCommand(),
	)
	return cmd
}

// sandboxView prints one sandbox as key/value rows.
func (a *app) sandboxView(info sandbox.SandboxInfo) view {
	return view{data: info, table: func(t *tableWriter) {
		image := "-"
		if info.Image != nil {
			image = info.Image.URI
		}
		t.row("ID", info.ID)
		t.row("STATE", colorState(a.colorOn(), info.Status.State))
		if info.Status.Reason != "" || info.Status.Message != "" {
			t.row("REASON", strings.TrimSpace(info.Status.Reason+" "+info.Status.Message))
		}
		t.row("IMAGE", image)
		if info.SnapshotID != "" {
			t.row("SNAPSHOT", info.SnapshotID)
		}
		t.row("ENTRYPOINT", dash(strings.Join(info.Entrypoint, " ")))
		t.row("METADATA", fmtMap(info.Metadata))
		t.row("CREATED", fmtTime(&info.CreatedAt))
		expires := fmtTime(info.ExpiresAt)
		if info.ExpiresAt == nil {
			expires = "never (manual cleanup)"
		}
		t.row("EXPIRES", expires)
	}}
}

// parsePairs reads repeated K=V flags into a map.
func parsePairs(flag string, items []string) (map[string]string, error) {
	if len(items) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(items))
	for _, it := range items {
		k, v, ok := strings.Cut(it, "=")
		if !ok || k == "" {
			return nil, usagef("--%s %q: want KEY=VALUE", flag, it)
		}
		m[k] = v
	}
	return m, nil
}

// parseDurationFlag reads a duration flag that may also be bare seconds.
func parseDurationFlag(flag, v string) (time.Duration, error) {
	d, err := parseSeconds(v)
	if err != nil {
		return 0, usagef("--%s: %v", flag, err)
	}
	return d, nil
}

func notFoundHint(err error, id string) error {
	if sandbox.IsNotFound(err) {
		return withHint(err, fmt.Sprintf("no sandbox %q; list sandboxes with: osb sandbox list", id))
	}
	return err
}
