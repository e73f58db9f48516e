package osbcli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func (a *app) sandboxHealthCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "health <sandbox-id>",
		Short:   "Check that a sandbox's execd answers (exit 1 when it does not)",
		Example: `  osb sandbox health 3f2c9a1e-... && echo ready`,
		Args:    exactArgs(1, "<sandbox-id>"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.sdk()
			if err != nil {
				return err
			}
			sb, err := c.Connect(cmd.Context(), args[0], sandbox.ConnectOptions{SkipHealthCheck: true})
			if err != nil {
				return notFoundHint(err, args[0])
			}
			if !sb.Healthy(cmd.Context()) {
				return withHint(errors.New("sandbox "+args[0]+" is unhealthy: execd does not answer"),
					"inspect it with: osb devops summary "+args[0])
			}
			fmt.Fprintln(a.io.out, "healthy")
			return nil
		},
	}
}
