package fsm

import (
	"slices"

	"github.com/mcpledger/mcpledger/events"
)

// Admission decides, from one config reading, whether server config c may
// launch. It returns [events.ReasonNone] when admitted, otherwise the first
// reason that refuses it, in this order: invalid_config, disabled,
// not_allowed (launch bound, then settings allow-list), excluded, untrusted
// (stdio from an untrusted workspace), rejected, pending_approval. The storm
// breaker is checked separately (see [StormHold]) because it needs time.
//
// Gating semantics (seed 004): the launch bound (--allowed-servers) is an
// upper bound that settings can only narrow; allowed absent allows all,
// allowed [] denies all; excluded narrows further; a gated server is
// admitted only with an approval for its exact config hash.
func Admission(obs *events.ConfigObserved, c *events.ServerConfig) (events.Reason, string) {
	switch {
	case c.Invalid != "":
		return events.ReasonInvalidConfig, c.Invalid
	case c.Disabled:
		return events.ReasonDisabled, "disabled in " + sourceOf(c)
	case obs.HasLaunchBound && !slices.Contains(obs.LaunchBound, c.Name):
		return events.ReasonNotAllowed, "not in --allowed-servers given at launch"
	case obs.HasAllowed && !slices.Contains(obs.Allowed, c.Name):
		if len(obs.Allowed) == 0 {
			return events.ReasonNotAllowed, "settings allowed is [] (deny all)"
		}
		return events.ReasonNotAllowed, "not in settings allowed"
	case slices.Contains(obs.Excluded, c.Name):
		return events.ReasonExcluded, "listed in settings excluded"
	case c.Transport == events.TransportStdio && c.Scope == events.ScopeProject && !obs.Trusted:
		return events.ReasonUntrusted, "stdio server from untrusted workspace " + obs.Workspace
	}
	if c.Gated {
		a := c.Approval
		switch {
		case a.Hash == c.Hash && a.Decision == events.DecisionApprove:
			return events.ReasonNone, ""
		case a.Hash == c.Hash && a.Decision == events.DecisionReject:
			return events.ReasonRejected, "rejected by " + a.By
		case a.Decision != "":
			return events.ReasonPendingApproval, "config changed since the last decision"
		default:
			return events.ReasonPendingApproval, "never approved"
		}
	}
	return events.ReasonNone, ""
}

func sourceOf(c *events.ServerConfig) string {
	if c.Source != "" {
		return c.Source
	}
	return "config"
}
