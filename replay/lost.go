package replay

import (
	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/projections"
)

// LostCall is a call whose outcome is unknown: it was in flight when its
// connection, or its mcpledger, died, and its call.finished says lost.
// Whether the server ran it is unknown.
type LostCall struct {
	CallID string `json:"call_id"`
	Server string `json:"server"`
	// Name is the catalog name the caller used, Tool the server's own.
	Name string `json:"name"`
	Tool string `json:"tool"`
	// Started is the seq of its call.started, Seq that of the
	// call.finished that records it lost (in a session whose mcpledger
	// was killed, appended by the next session), with its Time and Error.
	Started uint64 `json:"started"`
	Seq     uint64 `json:"seq"`
	Time    int64  `json:"time"`
	Error   string `json:"error,omitempty"`
}

// LostCalls returns the calls among a session's events (in seq order)
// whose call.finished has outcome lost, in the order they were recorded
// lost.
func LostCalls(evs []events.Event) []LostCall {
	open := map[string]events.Event{} // call.started by call ID, until it finishes
	var out []LostCall
	for _, e := range evs {
		switch p := e.Payload.(type) {
		case *events.CallStarted:
			open[p.CallID] = e
		case *events.CallFinished:
			s, ok := open[p.CallID]
			if !ok {
				continue
			}
			delete(open, p.CallID)
			if p.Outcome != events.OutcomeLost {
				continue
			}
			c := s.Payload.(*events.CallStarted)
			name := c.Name
			if name == "" { // a call.started of a journal from before names were recorded
				name = projections.ToolName(s.Server, c.Tool)
			}
			out = append(out, LostCall{CallID: p.CallID, Server: s.Server, Name: name, Tool: c.Tool,
				Started: s.Seq, Seq: e.Seq, Time: e.Time, Error: p.Error})
		}
	}
	return out
}
