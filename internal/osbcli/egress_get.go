package osbcli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func (a *app) egressGetCommand() *cobra.Command {
	return a.sidecarView(&cobra.Command{
		Use:     "get <sandbox-id>",
		Short:   "Show the egress policy in force",
		Example: "  osb egress get 3f2c9a1e-...\n  osb egress get 3f2c9a1e-... -o json",
		Args:    exactArgs(1, "<sandbox-id>"),
	}, egressHint, func(ctx context.Context, c *sandbox.Client, args []string) (view, error) {
		st, err := c.Egress(args[0]).GetPolicy(ctx)
		if err != nil {
			return view{}, err
		}
		return policyView(st), nil
	})
}
