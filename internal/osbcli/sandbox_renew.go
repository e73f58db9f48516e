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
	cmd.Flags().StringVarP(&timeout, "timeout", "t", "", "new time to live from now (30m, 2h; required)")
	_ = cmd.MarkFlagRequired("timeout")
	return a.result(cmd, formatTable, func(cmd *cobra.Command, args []string) (view, error) {
		d, none, err := parseSandboxTimeout(timeout)
		if err != nil || none {
			return view{}, usagef("--timeout: want a positive duration such as 30m, got %q", timeout)
		}
		c, err := a.sdk()
		if err != nil {
			return view{}, err
		}
		expires, err := c.Renew(cmd.Context(), args[0], time.Now().Add(d))
		if err != nil {
			return view{}, notFoundHint(err, args[0])
		}
		data := map[string]any{"id": args[0], "expiresAt": expires}
		return view{data: data, table: func(t *tableWriter) {
			t.row("ID", args[0])
			t.row("EXPIRES", fmtTime(&expires))
		}}, nil
	})
}
