package runtime

import (
	"context"
	"encoding/json"
	"time"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime/config"
	"github.com/mcpledger/mcpledger/runtime/guard"
	"github.com/mcpledger/mcpledger/tracectx"
)

// policyFor returns the policy for tool of a server with settings cs:
// the tool's own, else the server's, else def (Options.CallPolicy).
func policyFor(cs config.CallSettings, tool string, def config.CallPolicy) config.CallPolicy {
	if p, ok := cs.ToolPolicies[tool]; ok {
		return p
	}
	if cs.Policy != "" {
		return cs.Policy
	}
	if def != "" {
		return def
	}
	return config.PolicyAlways
}

// ApprovalRequest is what an Approver is asked about a call under policy
// ask. Args are the arguments as they will be sent (not redacted: the
// approver is shown what the server will receive).
type ApprovalRequest struct {
	CallID      string
	Server      string
	Tool        string // the server's name for it
	Name        string // the catalog name
	Args        json.RawMessage
	DefHash     string
	Annotations events.ToolAnnotations
	Caller      string
}

// Approval is an approver's answer. By names who decided (a user name, a
// UI); it is journaled as "approver:" + By.
type Approval struct {
	Allow  bool
	By     string
	Reason string
}

// Approver decides calls under policy ask, for agents that embed the
// runtime and have their own approval UI. It may block (a person
// deciding) until ctx, the caller's context, ends; an error or a
// cancelled ctx denies the call. It is called from the calling goroutine.
type Approver func(ctx context.Context, req ApprovalRequest) (Approval, error)

// decision is the outcome of the approval step.
type decision struct {
	policy config.CallPolicy
	by     string // who allowed it: "policy", "approver:…", "user:…"
}

// approve applies the call policy. Under never and ask the decision is
// journaled durably as call.decided before anything else happens; a
// denial returns a *DeniedError. Under always nothing extra is journaled:
// call.started records policy always, by policy.
func (m *Manager) approve(ctx context.Context, cl *call) (decision, error) {
	pol := policyFor(cl.settings, cl.entry.Tool, m.opts.CallPolicy)
	if pol == config.PolicyAlways {
		return decision{policy: pol, by: "policy"}, nil
	}
	d := &events.CallDecided{CallID: cl.id, Tool: cl.entry.Tool, Name: cl.name, Policy: string(pol),
		DefHash: cl.entry.DefHash, Decision: events.CallDeny}
	d.TraceParent, d.TraceState = tracectx.Format(cl.caller) // a denied call joins the caller's trace too
	switch {
	case pol == config.PolicyNever:
		d.By, d.Reason = "policy", "the call policy for this tool is never"
	case cl.opts.UserApproved != "":
		d.By, d.Decision = "user:"+cl.opts.UserApproved, events.CallAllow
	case m.opts.Approver == nil:
		d.By, d.Reason = "policy", "the policy is ask and no approver is configured (embedders set Options.Approver; mcpledger call is the user's own approval)"
	default:
		a, err := m.opts.Approver(ctx, ApprovalRequest{CallID: cl.id, Server: cl.entry.Server, Tool: cl.entry.Tool,
			Name: cl.name, Args: json.RawMessage(cl.args), DefHash: cl.entry.DefHash, Annotations: cl.entry.Annotations,
			Caller: cl.opts.Caller})
		d.By = "approver"
		if a.By != "" {
			d.By += ":" + guard.OneLine(a.By)
		}
		switch {
		case err != nil:
			d.Reason = "the approver failed: " + err.Error()
		case ctx.Err() != nil:
			d.Reason = "the caller gave up waiting for approval"
		case a.Allow:
			d.Decision = events.CallAllow
		default:
			d.Reason = a.Reason
		}
	}
	// The decision is an input, journaled durably whatever the call
	// durability: it must precede the request. A caller that has gone
	// still gets its denial recorded.
	if _, err := m.submit(context.WithoutCancel(ctx), cl.entry.Server, d, true); err != nil {
		return decision{}, err
	}
	if d.Decision != events.CallAllow {
		return decision{}, &DeniedError{Tool: cl.name, By: d.By, Policy: string(pol), Reason: d.Reason}
	}
	return decision{policy: pol, by: d.By}, nil
}

// timeoutFor returns the call timeout for tool: the tool's own
// ("toolTimeouts"), else the server's ("timeout"), else
// Options.CallTimeout.
func (m *Manager) timeoutFor(spec *config.Spec, tool string) time.Duration {
	if d, ok := spec.Call.ToolTimeouts[tool]; ok && d > 0 {
		return d
	}
	if spec.Timeout > 0 {
		return spec.Timeout
	}
	return m.opts.CallTimeout
}

// setCallSettings publishes the call settings of the latest config
// reading. Call settings are not journaled config (they change no
// process), so they take effect on the next call, without a restart.
func (m *Manager) setCallSettings(specs map[string]config.Spec) {
	cs := make(map[string]config.CallSettings, len(specs))
	for name, s := range specs {
		cs[name] = s.Call
	}
	m.callSettings.Store(&cs)
}

// callSettingsFor returns server's call settings from the latest config
// reading, or those of the connection's spec.
func (m *Manager) callSettingsFor(server string, c *conn) config.CallSettings {
	if p := m.callSettings.Load(); p != nil {
		if s, ok := (*p)[server]; ok {
			return s
		}
	}
	return c.spec.Call
}
