package osbcli

import (
	"strconv"

	"github.com/spf13/cobra"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func (a *app) sandboxListCommand() *cobra.Command {
	var (
		states, metadata []string
		page, pageSize   int
	)
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List sandboxes, newest first",
		Example: `  osb sandbox list
  osb sandbox list -s running -s paused -m team=ai -o json`,
		Args: exactArgs(0, "none"),
	}
	f := cmd.Flags()
	f.StringArrayVarP(&states, "state", "s", nil, "only sandboxes in this state (repeatable, any case)")
	f.StringArrayVarP(&metadata, "metadata", "m", nil, "only sandboxes with this metadata KEY=VALUE (repeatable, all must match)")
	f.IntVar(&page, "page", 0, "page number, from 1")
	f.IntVar(&pageSize, "page-size", 0, "sandboxes per page, 1-200 (default 20)")
	return a.result(cmd, formatTable, func(cmd *cobra.Command, _ []string) (view, error) {
		md, err := parsePairs("metadata", metadata)
		if err != nil {
			return view{}, err
		}
		c, err := a.sdk()
		if err != nil {
			return view{}, err
		}
		resp, err := c.List(cmd.Context(), sandbox.ListOptions{States: states, Metadata: md, Page: page, PageSize: pageSize})
		if err != nil {
			return view{}, err
		}
		if resp.Items == nil {
			resp.Items = []sandbox.SandboxInfo{}
		}
		color := a.colorOn()
		return view{data: resp, table: func(t *tableWriter) {
			t.row("ID", colorPad(color, "STATE"), "IMAGE", "CREATED", "EXPIRES", "METADATA")
			for _, sb := range resp.Items {
				image := "-"
				if sb.Image != nil {
					image = sb.Image.URI
				} else if sb.SnapshotID != "" {
					image = "snapshot:" + sb.SnapshotID
				}
				expires := fmtTime(sb.ExpiresAt)
				if sb.ExpiresAt == nil {
					expires = "never"
				}
				t.row(sb.ID, colorState(color, sb.Status.State), image, fmtTime(&sb.CreatedAt), expires, fmtMap(sb.Metadata))
			}
			if p := resp.Pagination; p.HasNextPage {
				t.row("(page " + strconv.Itoa(p.Page) + " of " + strconv.Itoa(p.TotalPages) + "; next: --page " + strconv.Itoa(p.Page+1) + ")")
			}
		}}, nil
	})
}
