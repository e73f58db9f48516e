package osbcli

import (
	"time"

	"github.com/spf13/cobra"
)

func (a *app) sandboxRenewCommand() *cobra.Command {
	var timeout string
	cmd := &cobra.Command{
		Use:     "renew <sandbox-id>",
		Short:   "Move a sandbox's expiry to now + --timeout",
		Example: `  osb sandbox renew 3f2c9a1e-... -t 1h`,
		Args:    exactArgs(1, "<sandbox-id>"),
	}
	out := outputFlag(cmd, formatTable, formatJSON, formatYAML, formatRaw)
	cmd.Flags().StringVarP(&timeout, "timeout", "t", "", "new time to live from now (30m, 2h; required)")
	_ = cmd.MarkFlagRequired("timeout")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		d, none, err := parseSandboxTimeout(timeout)
		if err != nil || none {
			return usagef("--timeout: want a positive duration such as 30m, got %q", timeout)
		}
		c, err := a.sdk()
		if err != nil {
			return err
		}
		expires, err := c.Renew(cmd.Context(), args[0], time.Now().Add(d))
		if err != nil {
			return notFoundHint(err, args[0])
		}
		data := map[string]any{"id": args[0], "expiresAt": expires}
		return render(a.io.out, *out, view{data: data, table: func(t *tableWriter) {
			t.row("ID", args[0])
			t.row("EXPIRES", fmtTime(&expires))
		}})
	}
	return cmd
}
