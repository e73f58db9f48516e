package osbcli

import (
	"slices"

	"github.com/spf13/cobra"
)

func (a *app) sandboxEndpointCommand() *cobra.Command {
	var port int
	cmd := &cobra.Command{
		Use:   "endpoint <sandbox-id>",
		Short: "Show the address (and headers) that reach a port inside a sandbox",
		Example: `  osb sandbox endpoint 3f2c9a1e-... -p 8080
  osb --use-server-proxy sandbox endpoint 3f2c9a1e-... -p 44772 -o json`,
		Args: exactArgs(1, "<sandbox-id>"),
	}
	cmd.Flags().IntVarP(&port, "port", "p", 0, "port inside the sandbox (required)")
	_ = cmd.MarkFlagRequired("port")
	return a.result(cmd, formatTable, func(cmd *cobra.Command, args []string) (view, error) {
		if port < 1 || port > 65535 {
			return view{}, usagef("--port %d: want 1-65535", port)
		}
		c, err := a.sdk()
		if err != nil {
			return view{}, err
		}
		ep, err := c.Endpoint(cmd.Context(), args[0], port, a.settings.UseServerProxy)
		if err != nil {
			return view{}, notFoundHint(err, args[0])
		}
		return view{data: ep, table: func(t *tableWriter) {
			t.row("ENDPOINT", ep.Endpoint)
			keys := make([]string, 0, len(ep.Headers))
			for k := range ep.Headers {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				t.row("HEADER", k+": "+ep.Headers[k])
			}
		}}, nil
	})
}
