package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/mcpledger/mcpledger/events"
)

// TestLoopLinger: the loop waits for audited call records to gather only
// when the last durable commit shared several and more calls are in
// flight than records in hand; it stops waiting once as many have come
// as the last commit carried, or after callLinger.
func TestLoopLinger(t *testing.T) {
	rec := func(durable bool) *request {
		return &request{ev: events.Event{Kind: events.KindCallStarted}, durable: durable}
	}
	for _, tc := range []struct {
		name              string
		lastShared, calls int64
		first             *request
		queued            int // records waiting in the inbox
		want              int // the batch's size
		waits             bool
	}{
		{name: "enough queued", lastShared: 3, calls: 4, first: rec(true), queued: 2, want: 3},
		{name: "too few queued: waits, then goes", lastShared: 3, calls: 4, first: rec(true), queued: 1, want: 2, waits: true},
		{name: "a lone call", lastShared: 3, calls: 1, first: rec(true), queued: 0, want: 1},
		{name: "no more calls than records", lastShared: 3, calls: 2, first: rec(true), queued: 1, want: 2},
		{name: "the last commit alone", lastShared: 1, calls: 4, first: rec(true), queued: 0, want: 1},
		{name: "relaxed records", lastShared: 3, calls: 4, first: rec(false), queued: 0, want: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Manager{inbox: make(chan *request, 8), ctx: context.Background()}
			m.lastShared.Store(tc.lastShared)
			m.inCalls.Store(tc.calls)
			for range tc.queued {
				m.inbox <- rec(true)
			}
			timer := time.NewTimer(time.Hour)
			timer.Stop()
			t0 := time.Now()
			batch := m.linger([]*request{tc.first}, timer)
			took := time.Since(t0)
			if len(batch) != tc.want {
				t.Errorf("batch of %d, want %d", len(batch), tc.want)
			}
			if tc.waits && took < callLinger {
				t.Errorf("returned after %v, before callLinger (%v)", took, callLinger)
			}
			if len(m.inbox) != tc.queued-(len(batch)-1) {
				t.Errorf("%d left queued", len(m.inbox))
			}
		})
	}
}
