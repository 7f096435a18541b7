package runtime

import (
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
)

// TestSubmitDirect checks the rule of the direct path: a call record is
// decided on the caller's goroutine only when nothing is queued for the
// loop (so nothing queued before it is overtaken) and no other call is in
// flight, and no other input ever takes it. Taken, a durable record is
// journaled with the next seq, like the loop would; a relaxed one is held,
// and its hold still ends by its timer, which the loop arms when woken.
func TestSubmitDirect(t *testing.T) {
	j := &captureJournal{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "mem", Version: "1"}, nil)
	m, err := New(j, &Options{InProcess: map[string]*mcp.Server{"mem": srv}, PingInterval: -1, Seed: 1,
		RelaxedHold: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	req := func(p events.Payload, durable bool) *request {
		return &request{ev: events.Event{Kind: p.Kind(), Server: "mem", Payload: p}, durable: durable, reply: make(chan result, 1)}
	}
	started := func(id string) events.Payload { return &events.CallStarted{CallID: id, Tool: "t"} }

	m.queued.Add(1) // an input sent to the loop and not yet processed
	if m.submitDirect(req(started("c1"), true)) {
		t.Error("a call record overtook an input queued before it")
	}
	m.queued.Add(-1)
	m.inCalls.Add(2) // another call in flight: the loop batches their records
	for _, durable := range []bool{true, false} {
		if m.submitDirect(req(started("c2"), durable)) {
			t.Errorf("a call record (durable %v) went direct with two calls in flight", durable)
		}
	}
	m.inCalls.Add(-2)
	for _, r := range []*request{
		req(&events.PromptsListed{Attempt: 1}, true),
		{ev: events.Event{Kind: events.KindCallStarted, Server: "mem", Payload: started("c3")}, durable: true, noEvent: true},
	} {
		if m.submitDirect(r) {
			t.Errorf("%s (durable %v, noEvent %v) took the direct path", r.ev.Kind, r.durable, r.noEvent)
		}
	}

	// Once the servers' startup inputs are processed, the loop is idle.
	r := req(started("c4"), true)
	deadline := time.Now().Add(5 * time.Second)
	for !m.submitDirect(r) {
		if time.Now().After(deadline) {
			t.Fatal("the direct path was never taken with the loop idle")
		}
		time.Sleep(5 * time.Millisecond)
	}
	res := <-r.reply
	if res.err != nil || len(res.events) != 1 {
		t.Fatalf("result %+v", res)
	}
	evs := j.snapshot()
	last := evs[len(evs)-1]
	if p, ok := last.Payload.(*events.CallStarted); !ok || p.CallID != "c4" || last.Seq != res.events[0].Seq {
		t.Errorf("journal ends with %s %+v", last.Kind, last.Payload)
	}
	var seqs []uint64
	for _, e := range evs {
		seqs = append(seqs, e.Seq)
	}
	if !slices.IsSorted(seqs) || seqs[len(seqs)-1] != uint64(len(seqs)) {
		t.Errorf("seqs %v: not 1..n in order", seqs)
	}

	// A relaxed record is held, not journaled; nothing else comes to the
	// loop, yet the hold ends by its timer.
	rr := req(started("c6"), false)
	for !m.submitDirect(rr) {
		if time.Now().After(deadline) {
			t.Fatal("the direct path was never taken by a relaxed record with the loop idle")
		}
		time.Sleep(5 * time.Millisecond)
	}
	held := func() bool {
		m.procMu.Lock()
		defer m.procMu.Unlock()
		return len(m.held) > 0
	}
	journaled := func() bool {
		evs := j.snapshot()
		p, ok := evs[len(evs)-1].Payload.(*events.CallStarted)
		return ok && p.CallID == "c6"
	}
	for held() || !journaled() {
		if time.Now().After(deadline) {
			t.Fatalf("a relaxed record held on the direct path was not journaled within 5 s (held %v)", held())
		}
		time.Sleep(5 * time.Millisecond)
	}

	// After Close the loop has ended: no direct path.
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, durable := range []bool{true, false} {
		if m.submitDirect(req(started("c5"), durable)) {
			t.Errorf("the direct path was taken after Close (durable %v)", durable)
		}
	}
}
