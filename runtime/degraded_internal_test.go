package runtime

import (
	"testing"
	"time"

	"github.com/mcpledger/mcpledger/events"
)

// TestOutageKeep: while the journal fails, observations are kept in
// arrival order; a listing supersedes the same server's earlier listing of
// its kind (counted as coalesced, moved to the end); past the bound the
// newest observations are dropped and counted, never the kept ones.
func TestOutageKeep(t *testing.T) {
	defer func(n int) { maxBacklog = n }(maxBacklog)
	maxBacklog = 4
	obs := func(kind events.Kind, server string) *request {
		return &request{ev: events.Event{Kind: kind, Server: server}}
	}
	o := &outage{}
	for _, r := range []*request{
		obs(events.KindToolsListed, "a"),
		obs(events.KindProcessExited, "b"),
		obs(events.KindToolsListed, "b"),
		obs(events.KindPromptsListed, "a"), // another kind: not superseded
		obs(events.KindToolsListed, "a"),   // supersedes the first
		obs(events.KindPingFailed, "c"),    // past the bound
		obs(events.KindToolsListed, "a"),   // supersedes, even when full
	} {
		o.keep(r)
	}
	var got []string
	for _, r := range o.backlog {
		got = append(got, string(r.ev.Kind)+"/"+r.ev.Server)
		if !r.durable || r.reply != nil {
			t.Errorf("kept %s: durable %v, reply %v; want durable with nobody waiting", r.ev.Kind, r.durable, r.reply)
		}
	}
	want := []string{"process.exited/b", "tools.listed/b", "prompts.listed/a", "tools.listed/a"}
	if len(got) != len(want) {
		t.Fatalf("backlog %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("backlog %v, want %v", got, want)
		}
	}
	if o.coalesced != 2 || o.dropped != 1 {
		t.Errorf("coalesced %d, dropped %d; want 2, 1", o.coalesced, o.dropped)
	}
}

// TestObservation: what is kept while the journal fails is what happened
// in the world; commands a caller can repeat, and an audited call.started
// (its call is not sent), are refused.
func TestObservation(t *testing.T) {
	for _, c := range []struct {
		r    *request
		want bool
	}{
		{&request{ev: events.Event{Kind: events.KindProcessExited}, durable: true}, true},
		{&request{ev: events.Event{Kind: events.KindTimerFired}, durable: true}, true},
		{&request{ev: events.Event{Kind: events.KindCallFinished}, durable: true, reply: make(chan result, 1)}, true},
		{&request{ev: events.Event{Kind: events.KindGatewayRejected}, durable: true}, true},
		{&request{ev: events.Event{Kind: events.KindCallStarted}}, true}, // relaxed: on its way
		{&request{ev: events.Event{Kind: events.KindCallStarted}, durable: true}, false},
		{&request{ev: events.Event{Kind: events.KindCallDecided}, durable: true}, false},
		{&request{ev: events.Event{Kind: events.KindStopRequested}, durable: true}, false},
		{&request{ev: events.Event{Kind: events.KindReconnectRequested}, durable: true}, false},
		{&request{ev: events.Event{Kind: events.KindApprovalDecided}, durable: true}, false},
		{&request{ev: events.Event{Kind: events.KindSessionStarted}, durable: true}, false},
		{&request{ev: events.Event{Kind: events.KindConfigObserved}, durable: true}, false},
		{&request{ev: events.Event{Kind: events.KindToolsListed}, prepare: func() {}}, false},
		{&request{ev: events.Event{Kind: events.KindToolsListed}, check: func() error { return nil }}, false},
		{&request{noEvent: true}, false},
	} {
		if got := observation(c.r); got != c.want {
			t.Errorf("%s (durable %v, prepare %v, check %v, noEvent %v): kept %v, want %v",
				c.r.ev.Kind, c.r.durable, c.r.prepare != nil, c.r.check != nil, c.r.noEvent, got, c.want)
		}
	}
}

// TestRetryDelay: 100 ms, doubling, at most 5 s.
func TestRetryDelay(t *testing.T) {
	want := []time.Duration{100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000}
	for i, w := range want {
		if got := retryDelay(i + 1); got != w*time.Millisecond {
			t.Errorf("retryDelay(%d) = %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
	if got := retryDelay(1000); got != journalRetryMax {
		t.Errorf("retryDelay(1000) = %v", got)
	}
}
