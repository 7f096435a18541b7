package replay_test

import (
	"slices"
	"testing"

	"github.com/mcpledger/mcpledger/replay"
)

// TestWhyNeedsAuth: a tool of a server blocked on authorization, or the
// server named bare, is explained as blocked, with what the server
// answered, the sign-ins that failed since the block, and the recovery;
// once signed in and ready, it is available.
func TestWhyNeedsAuth(t *testing.T) {
	evs := tlAuthSession(t) // #9 blocked, #10 consent denied, #11 signed in, #16 ready, #19 blocked again, #25 ready
	blocked := replay.Reason{Seq: 9, Text: "server gh is blocked on authorization: it asked for an OAuth sign-in (auth: 401 Unauthorized); no tool of it is offered until it is signed in"}
	recovery := replay.Reason{Text: "recovery: sign in with: mcpledger login gh"}
	denied := replay.Reason{Seq: 10, Text: "a sign-in failed since: consent at https://auth.example.com: access_denied"}
	for _, c := range []struct {
		tool      string
		seq       uint64
		available bool
		want      []replay.Reason
	}{
		{"mcp__gh__search", 9, false, []replay.Reason{{Seq: 9, Text: "server gh was failed (needs_auth)"}, blocked, recovery}},
		{"mcp__gh__search", 10, false, []replay.Reason{{Seq: 9, Text: "server gh was failed (needs_auth)"}, blocked, denied, recovery}},
		{"gh", 10, false, []replay.Reason{{Seq: 9, Text: "server gh was failed (needs_auth)"}, blocked, denied, recovery}},
		{"gh", 12, false, []replay.Reason{{Seq: 12, Text: "server gh was launching"}}},
		{"gh", 16, true, []replay.Reason{{Seq: 16, Text: "server gh was ready"}}},
		// The second block: the consent denied before it is not its.
		{"gh", 19, false, []replay.Reason{{Seq: 19, Text: "server gh was failed (needs_auth)"},
			{Seq: 19, Text: "server gh is blocked on authorization: it asked for an OAuth sign-in (auth: 401 Unauthorized); no tool of it is offered until it is signed in"}, recovery}},
		{"mcp__gh__search", 25, true, []replay.Reason{{Seq: 24, Text: "search was listed by gh"}}},
		{"gx", 25, false, []replay.Reason{{Text: `no configured server's name matches "gx" at seq 25`}}},
	} {
		ex := why(t, evs, c.tool, c.seq)
		if ex.Available != c.available || !slices.Equal(ex.Reasons, c.want) {
			t.Errorf("why %s at seq %d: available %v, reasons\n%+v\nwant %v\n%+v", c.tool, c.seq, ex.Available, ex.Reasons, c.available, c.want)
		}
		if c.tool != "gx" && ex.Server != "gh" {
			t.Errorf("why %s at seq %d: server %q", c.tool, c.seq, ex.Server)
		}
	}
}
