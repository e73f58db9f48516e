package osbcli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// The egress commands talk to a sandbox's egress sidecar, found like execd
// through the lifecycle server's endpoint route (port 18080). Only
// sandboxes created with a network policy have one.

func (a *app) egressCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "egress",
		Short: "Network egress policy of a sandbox",
		Long: `Inspect and change where a sandbox may connect to. Only sandboxes created
with a network policy (osb sandbox create --network-policy-file) have one.`,
	}
	cmd.AddCommand(
		a.egressGetCommand(),
		a.egressPatchCommand(),
		a.egressSetCommand(),
		a.egressDeleteCommand(),
	)
	return cmd
}

// sidecarView finishes a read-only egress or vault command: it fetches a
// view through the SDK, adds hint to a failure and renders the view in
// the -o format.
func (a *app) sidecarView(cmd *cobra.Command, hint func(error, string) error,
	fetch func(ctx context.Context, c *sandbox.Client, args []string) (view, error)) *cobra.Command {
	return a.result(cmd, formatTable, func(cmd *cobra.Command, args []string) (view, error) {
		c, err := a.sdk()
		if err != nil {
			return view{}, err
		}
		v, err := fetch(cmd.Context(), c, args)
		if err != nil {
			return view{}, hint(err, args[0])
		}
		return v, nil
	})
}

// egressHint adds what to do next to errors of the egress sidecar.
func egressHint(err error, id string) error {
	var ae *sandbox.APIError
	if !errors.As(err, &ae) {
		return err
	}
	switch {
	case strings.HasPrefix(ae.Code, "EGRESS::") && ae.StatusCode == 401:
		return withHint(err, "the sidecar refused its token; the lifecycle server hands it out with the endpoint (osb sandbox endpoint "+id+" -p 18080)")
	case strings.HasPrefix(ae.Code, "EGRESS::") && ae.StatusCode == 426:
		return withHint(err, "reach the sidecar through the server proxy: --use-server-proxy")
	case !strings.HasPrefix(ae.Code, "EGRESS::") && ae.StatusCode == 502:
		return withHint(err, "nothing answers on port 18080: only sandboxes created with --network-policy-file have an egress sidecar")
	case !strings.HasPrefix(ae.Code, "EGRESS::") && ae.StatusCode == 404:
		return withHint(err, fmt.Sprintf("no sandbox %q, or it has no egress sidecar (create it with --network-policy-file); list sandboxes with: osb sandbox list", id))
	}
	return err
}

// parseRules reads --rule ACTION=TARGET flags.
func parseRules(items []string) ([]sandbox.NetworkRule, error) {
	rules := make([]sandbox.NetworkRule, 0, len(items))
	for _, it := range items {
		action, target, ok := strings.Cut(it, "=")
		action = strings.ToLower(strings.TrimSpace(action))
		target = strings.TrimSpace(target)
		if !ok || (action != "allow" && action != "deny") || target == "" {
			return nil, usagef("--rule %q: want ACTION=TARGET with ACTION allow or deny and TARGET a domain, *.domain, IP or CIDR, e.g. --rule allow=pypi.org", it)
		}
		rules = append(rules, sandbox.NetworkRule{Action: action, Target: target})
	}
	return rules, nil
}

// policyView prints a policy status as key/value rows, one rule a line.
func policyView(st *sandbox.PolicyStatus) view {
	return view{data: st, table: func(t *tableWriter) {
		t.row("MODE", st.Mode)
		t.row("ENFORCEMENT", dash(st.EnforcementMode))
		if st.Reason != "" {
			t.row("REASON", st.Reason)
		}
		def, rules := "deny", []sandbox.NetworkRule(nil)
		if p := st.Policy; p != nil {
			rules = p.Egress
			if p.DefaultAction != "" {
				def = p.DefaultAction
			}
		}
		t.row("DEFAULT", def)
		if len(rules) == 0 {
			t.row("RULES", "-")
		}
		for i, r := range rules {
			key := ""
			if i == 0 {
				key = "RULES"
			}
			t.row(key, r.Action+" "+r.Target)
		}
	}}
}
