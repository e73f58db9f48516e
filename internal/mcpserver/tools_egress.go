package mcpserver

import (
	"context"
	"fmt"
	"strings"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// The egress tools talk to a sandbox's egress sidecar through the SDK; they
// work on any sandbox id created with a network_policy, connected or not.
// The credential vault is deliberately not exposed: its writes carry
// secret values, which must not pass through a model's context.

// EgressPolicyOut is the reply of egress_get_policy and egress_patch_policy.
type EgressPolicyOut struct {
	SandboxID       string         `json:"sandbox_id" jsonschema:"sandbox id"`
	Mode            string         `json:"mode" jsonschema:"allow_all, deny_all or enforcing"`
	EnforcementMode string         `json:"enforcement_mode" jsonschema:"dns (domain rules only) or dns+nft (IP and CIDR rules enforced too)"`
	Reason          string         `json:"reason,omitempty" jsonschema:"extra context, e.g. why enforcement is off"`
	DefaultAction   string         `json:"default_action" jsonschema:"allow or deny: what happens to egress no rule matches"`
	Egress          []EgressRuleIn `json:"egress" jsonschema:"rules in force, first match wins"`
}

func policyOut(id string, st *sandbox.PolicyStatus) EgressPolicyOut {
	out := EgressPolicyOut{SandboxID: id, Mode: st.Mode, EnforcementMode: st.EnforcementMode, Reason: st.Reason, DefaultAction: "deny", Egress: []EgressRuleIn{}}
	if p := st.Policy; p != nil {
		if p.DefaultAction != "" {
			out.DefaultAction = p.DefaultAction
		}
		for _, r := range p.Egress {
			out.Egress = append(out.Egress, EgressRuleIn{Action: r.Action, Target: r.Target})
		}
	}
	return out
}

func (t *tools) egressGetPolicy(ctx context.Context, in LifecycleIDIn) (EgressPolicyOut, error) {
	if in.SandboxID == "" {
		return EgressPolicyOut{}, errMissing("sandbox_id")
	}
	st, err := t.cfg.Client.Egress(in.SandboxID).GetPolicy(ctx)
	if err != nil {
		return EgressPolicyOut{}, egressErr(err)
	}
	return policyOut(in.SandboxID, st), nil
}

// EgressPatchIn is the input of egress_patch_policy.
type EgressPatchIn struct {
	SandboxID string         `json:"sandbox_id" jsonschema:"sandbox id"`
	Rules     []EgressRuleIn `json:"rules" jsonschema:"rules to merge: they go before the existing rules and replace rules with the same target; the default action is kept"`
}

func (t *tools) egressPatchPolicy(ctx context.Context, in EgressPatchIn) (EgressPolicyOut, error) {
	if in.SandboxID == "" {
		return EgressPolicyOut{}, errMissing("sandbox_id")
	}
	if len(in.Rules) == 0 {
		return EgressPolicyOut{}, fmt.Errorf("rules needs at least one {action, target}")
	}
	rules := make([]sandbox.NetworkRule, len(in.Rules))
	for i, r := range in.Rules {
		action := strings.ToLower(strings.TrimSpace(r.Action))
		if action != "allow" && action != "deny" {
			return EgressPolicyOut{}, fmt.Errorf("rules[%d].action must be allow or deny, not %q", i, r.Action)
		}
		if strings.TrimSpace(r.Target) == "" {
			return EgressPolicyOut{}, fmt.Errorf("rules[%d].target is required", i)
		}
		rules[i] = sandbox.NetworkRule{Action: action, Target: strings.TrimSpace(r.Target)}
	}
	st, err := t.cfg.Client.Egress(in.SandboxID).PatchPolicy(ctx, rules)
	if err != nil {
		return EgressPolicyOut{}, egressErr(err)
	}
	return policyOut(in.SandboxID, st), nil
}

// egressErr says what a 404 from the endpoint lookup usually means.
func egressErr(err error) error {
	if sandbox.IsNotFound(err) {
		return fmt.Errorf("%w (the sandbox does not exist or was created without network_policy, so it has no egress sidecar)", err)
	}
	return err
}
