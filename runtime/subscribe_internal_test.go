package runtime

import (
	"testing"
	"time"
)

// TestSubscribeBesidePublish: Subscribe never blocks, however its first
// view and one publish made at the same time interleave. It hung when
// the publish filled the channel's one slot between Subscribe's
// registering the channel and sending the first view into it, and no
// later publish came to drain it (Start waited on its gate for good).
func TestSubscribeBesidePublish(t *testing.T) {
	m := &Manager{subs: map[chan *View]struct{}{}}
	m.view.Store(&View{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 200_000 {
			published := make(chan struct{})
			go func() { m.publish(&View{}); close(published) }()
			_, cancel := m.Subscribe()
			cancel()
			<-published
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Subscribe blocked beside a publish")
	}
}
