package fsm_test

import (
	"testing"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/fsm"
)

func TestCheckApproval(t *testing.T) {
	reading := func(servers ...events.ServerConfig) events.Event {
		return events.Event{Kind: events.KindConfigObserved, Payload: &events.ConfigObserved{Servers: servers}}
	}
	gh := events.ServerConfig{Name: "gh", Gated: true, Transport: events.TransportStdio, Command: "gh-mcp", Hash: "h1"}
	old := events.ServerConfig{Name: "old", Transport: events.TransportStdio, Command: "old", Hash: "o1"}
	st := fsm.Evolve(fsm.State{}, reading(gh, old))
	st = fsm.Evolve(st, reading(gh)) // old is removed from the config
	cases := []struct {
		server, hash string
		want         error
	}{
		{"gh", "h1", nil},
		{"gh", "h0", fsm.ErrStaleApproval},
		{"ghost", "h1", fsm.ErrUnknownServer},
		{"old", "o1", fsm.ErrUnknownServer},
	}
	for _, c := range cases {
		err := fsm.CheckApproval(st, c.server, c.hash)
		if c.want == nil && err != nil || c.want != nil && !errorsIs(err, c.want) {
			t.Errorf("CheckApproval(%s, %s) = %v, want %v", c.server, c.hash, err, c.want)
		}
	}
}
