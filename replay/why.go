package replay

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/projections"
)

// Reason is one link in the chain that explains a tool's availability:
// what was true and the event that made it so.
type Reason struct {
	// Seq is the event that established it (0 if none applies).
	Seq  uint64 `json:"seq"`
	Text string `json:"text"`
}

// Explanation answers "was this tool available to the agent then, and if
// not, why?".
type Explanation struct {
	Tool      string `json:"tool"`
	Server    string `json:"server,omitempty"`
	Seq       uint64 `json:"seq"`
	Available bool   `json:"available"`
	// Deferred and Stale qualify an available tool.
	Deferred bool     `json:"deferred,omitempty"`
	Stale    bool     `json:"stale,omitempty"`
	Reasons  []Reason `json:"reasons"`
	// Lost are the calls of the tool recorded lost by then: their outcome
	// is unknown.
	Lost []LostCall `json:"lost,omitempty"`
}

// Why explains whether tool (a catalog name, mcp__server__tool) was in the
// session's catalog right after event seq (0: the last event), and if not,
// the chain of reasons with the seqs that caused each: the server's state,
// its admission verdict, its approval, a tool filter, a changed definition,
// a sign-in it waits for (with the recovery, mcpledger login NAME).
// tool may also be a configured server's name (that no catalog name
// matches): the server is explained, Available when it was ready.
func Why(ctx context.Context, r Reader, session uuid.UUID, tool string, seq uint64) (*Explanation, error) {
	snap, err := At(ctx, r, session, seq)
	if err != nil {
		return nil, err
	}
	ex := explain(snap, tool)
	for _, c := range snap.Lost {
		if c.Name == tool {
			ex.Lost = append(ex.Lost, c)
		}
	}
	return ex, nil
}

func explain(snap *Snapshot, tool string) *Explanation {
	ex := &Explanation{Tool: tool, Seq: snap.Seq}
	for _, e := range snap.Catalog.Tools {
		if e.Name == tool {
			ex.Available, ex.Server, ex.Deferred, ex.Stale = true, e.Server, e.Deferred, e.Stale
			last := lastEvent(snap.Events, e.Server, events.KindToolsListed)
			txt := fmt.Sprintf("%s was listed by %s", e.Tool, e.Server)
			switch {
			case e.Deferred:
				txt = fmt.Sprintf("%s is offered from the tool cache while %s connects (a call waits for it)", e.Tool, e.Server)
			case e.Stale:
				txt += " (stale: the server is reconnecting)"
			}
			ex.Reasons = append(ex.Reasons, Reason{Seq: last, Text: txt})
			return ex
		}
	}
	server, own := serverOf(snap, tool)
	bare := false
	if _, ok := snap.State.Server(tool); server == "" && ok {
		server, bare = tool, true // a server's name: explain the server
	}
	ex.Server = server
	if server == "" {
		ex.Reasons = append(ex.Reasons, Reason{Text: fmt.Sprintf("no configured server's name matches %q at seq %d", tool, snap.Seq)})
		return ex
	}
	st, _ := snap.State.Server(server)
	tr := lastTransition(snap.Events, server)
	ex.Available = bare && st.Phase == events.StateReady
	ex.Reasons = append(ex.Reasons, Reason{Seq: tr, Text: fmt.Sprintf("server %s was %s%s", server, st.Phase, paren(string(st.Reason)))})
	if st.Phase == events.StateFailed && st.Reason == events.ReasonNeedsAuth {
		ex.Reasons = append(ex.Reasons, authReasons(snap.Events, server, tr)...)
	}
	if seq, a := lastAdmission(snap.Events, server); seq != 0 && !a.Admitted {
		ex.Reasons = append(ex.Reasons, Reason{Seq: seq, Text: fmt.Sprintf("admission refused it: %s (%s)", a.Reason, a.Detail)})
	}
	if st.Config.Gated {
		ex.Reasons = append(ex.Reasons, approvalReason(snap, server, st.Config))
	}
	left := uint64(0) // the listing that left own out, whatever the server's state
	if own != "" {
		var why string
		if left, why = excluded(snap.Events, server, own); left != 0 {
			ex.Reasons = append(ex.Reasons, Reason{Seq: left,
				Text: fmt.Sprintf("%s listed %s, but it was left out of the catalog: %s", server, own, why)})
		}
	}
	if own != "" && st.Phase == events.StateReady && left == 0 {
		if slices.Contains(st.Withheld, own) {
			ex.Reasons = append(ex.Reasons, Reason{Seq: lastEvent(snap.Events, server, events.KindToolsChanged),
				Text: fmt.Sprintf("tool %s changed its definition since the approval: withheld (tool_changed)", own)})
		} else if !listed(snap.Events, server, own) {
			ex.Reasons = append(ex.Reasons, Reason{Seq: lastEvent(snap.Events, server, events.KindToolsListed),
				Text: fmt.Sprintf("%s's last listing has no tool %s", server, own)})
		} else {
			ex.Reasons = append(ex.Reasons, Reason{Seq: lastEvent(snap.Events, "", events.KindConfigObserved),
				Text: fmt.Sprintf("a tool filter of %s excludes %s (include %v, exclude %v)", server, own, st.Config.IncludeTools, st.Config.ExcludeTools)})
		}
	}
	return ex
}

// authReasons explain a server failed for want of a sign-in, blocked by
// the transition at seq tr: what the server answered, the sign-in
// attempts that failed since, and the recovery.
func authReasons(evs []events.Event, server string, tr uint64) []Reason {
	why := "it asked for an OAuth sign-in"
	var failed []Reason
	for _, e := range evs {
		if e.Server != server || e.Seq < tr {
			continue
		}
		switch p := e.Payload.(type) {
		case *events.ServerTransitioned:
			if p.Error != nil {
				why += " (" + p.Error.String() + ")"
			}
		case *events.AuthFailed:
			failed = append(failed, Reason{Seq: e.Seq, Text: fmt.Sprintf("a sign-in failed since: %s%s: %s", p.Phase, tlPrefix(" at ", p.Issuer), p.Error)})
		}
	}
	out := []Reason{{Seq: tr, Text: fmt.Sprintf("server %s is blocked on authorization: %s; no tool of it is offered until it is signed in", server, why)}}
	out = append(out, failed...)
	return append(out, Reason{Text: "recovery: sign in with: mcpledger login " + server})
}

func paren(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// serverOf finds the configured server a catalog name belongs to ("" if
// none), and the server's own tool name: the server whose name, spelled as
// catalog names spell it, is the longest prefix of the name.
func serverOf(snap *Snapshot, tool string) (string, string) {
	rest, ok := strings.CutPrefix(tool, projections.ToolNamePrefix)
	if !ok {
		return "", ""
	}
	best, bestPrefix := "", ""
	for _, name := range snap.State.Names() {
		p := strings.TrimSuffix(strings.TrimPrefix(projections.ToolName(name, "x"), projections.ToolNamePrefix), "x")
		if strings.HasPrefix(rest, p) && len(p) > len(bestPrefix) {
			best, bestPrefix = name, p
		}
	}
	return best, rest[len(bestPrefix):]
}

func approvalReason(snap *Snapshot, server string, c events.ServerConfig) Reason {
	seq := uint64(0)
	for _, e := range snap.Events {
		if e.Server == server && (e.Kind == events.KindApprovalDecided || e.Kind == events.KindApprovalRequested) {
			seq = e.Seq
		}
	}
	a := c.Approval
	if a.Hash == c.Hash && a.Decision == events.DecisionApprove {
		return Reason{Seq: seq, Text: fmt.Sprintf("approved by %s for config %s", a.By, events.ShortHash(c.Hash))}
	}
	if a.Hash == c.Hash && a.Decision == events.DecisionReject {
		return Reason{Seq: seq, Text: fmt.Sprintf("rejected by %s for config %s", a.By, events.ShortHash(c.Hash))}
	}
	if a.Decision != "" {
		return Reason{Seq: seq, Text: fmt.Sprintf("pending approval: the last decision (%s by %s) was for config %s, now %s; changed: %s",
			a.Decision, a.By, events.ShortHash(a.Hash), events.ShortHash(c.Hash), strings.Join(a.Changed, ", "))}
	}
	return Reason{Seq: seq, Text: fmt.Sprintf("pending approval: config %s was never approved (mcpledger approve %s)", events.ShortHash(c.Hash), server)}
}

func lastTransition(evs []events.Event, server string) uint64 {
	return lastEvent(evs, server, events.KindServerTransitioned)
}

func lastEvent(evs []events.Event, server string, k events.Kind) uint64 {
	for _, e := range slices.Backward(evs) {
		if e.Kind == k && (server == "" || e.Server == server) {
			return e.Seq
		}
	}
	return 0
}

func lastAdmission(evs []events.Event, server string) (uint64, *events.AdmissionDecided) {
	for _, e := range slices.Backward(evs) {
		if a, ok := e.Payload.(*events.AdmissionDecided); ok && e.Server == server {
			return e.Seq, a
		}
	}
	return 0, nil
}

func listed(evs []events.Event, server, tool string) bool {
	for _, e := range slices.Backward(evs) {
		if p, ok := e.Payload.(*events.ToolsListed); ok && e.Server == server {
			return slices.ContainsFunc(p.Tools, func(t events.Tool) bool { return t.Name == tool })
		}
	}
	return false
}

// excluded returns the seq of server's last listing and the reason it
// gives for leaving tool out (an invalid x-mcp-header annotation), or 0 if
// that listing did not leave it out.
func excluded(evs []events.Event, server, tool string) (uint64, string) {
	for _, e := range slices.Backward(evs) {
		if p, ok := e.Payload.(*events.ToolsListed); ok && e.Server == server {
			for _, x := range p.Excluded {
				if x.Name == tool {
					return e.Seq, x.Reason
				}
			}
			return 0, ""
		}
	}
	return 0, ""
}
