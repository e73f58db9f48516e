package osbcli

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func (a *app) sandboxHealthCommand() *cobra.Command {
	return a.result(&cobra.Command{
		Use:   "health <sandbox-id>",
		Short: "Check that a sandbox's execd answers (exit 1 when it does not)",
		Long: `Checks that a sandbox's execd answers: prints "healthy" (-o json:
{"id", "healthy": true}), or reports it unhealthy and exits 1 (-o json still
prints {"id", "healthy": false} first).`,
		Example: `  osb sandbox health 3f2c9a1e-... && echo ready`,
		Args:    exactArgs(1, "<sandbox-id>"),
	}, formatTable, func(cmd *cobra.Command, args []string) (view, error) {
		c, err := a.sdk()
		if err != nil {
			return view{}, err
		}
		sb, err := c.Connect(cmd.Context(), args[0], sandbox.ConnectOptions{SkipHealthCheck: true})
		if err != nil {
			return view{}, notFoundHint(err, args[0])
		}
		healthy := sb.Healthy(cmd.Context())
		data := map[string]any{"id": args[0], "healthy": healthy}
		if !healthy {
			// The table form says it on stderr only, as before.
			v := view{data: data, table: func(*tableWriter) {}}
			return v, withHint(errors.New("sandbox "+args[0]+" is unhealthy: execd does not answer"),
				"inspect it with: osb devops summary "+args[0])
		}
		return view{data: data, table: func(t *tableWriter) { t.row("healthy") }}, nil
	})
}
