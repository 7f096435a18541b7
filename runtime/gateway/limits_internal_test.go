package gateway

import (
	"testing"
	"time"
)

func TestBudget(t *testing.T) {
	b := &budget{maxBytes: 16 << 20, maxReqs: 4}
	// Large bodies leave a sixteenth (1 MiB) to small ones.
	if !b.take(8<<20) || !b.take(7<<20) {
		t.Fatal("15 MiB of large bodies in a 16 MiB budget")
	}
	if b.take(smallBody + 1) {
		t.Error("a large body took the reserve")
	}
	if !b.take(smallBody) {
		t.Error("a small body was refused with the reserve free")
	}
	if b.take(1<<20 - smallBody + 1) {
		t.Error("a small body took more than the budget")
	}
	b.give(smallBody)
	b.give(7 << 20)
	if b.bytes != 8<<20 || b.reqs != 1 {
		t.Errorf("after give: %d bytes, %d requests", b.bytes, b.reqs)
	}
	if b.take(7<<20 + 1) {
		t.Error("a large body reached into the reserve")
	}
	if !b.take(7 << 20) {
		t.Error("a large body refused up to the reserve")
	}
	for range 2 {
		if !b.take(1) {
			t.Fatal("a small body refused with room")
		}
	}
	if b.take(1) {
		t.Error("a fifth request passed a budget of 4")
	}
}

func TestBudgetIdle(t *testing.T) {
	fired := make(chan struct{}, 4)
	b := &budget{maxBytes: 16 << 20, maxReqs: 4, idle: func() { fired <- struct{}{} }}
	b.take(10)
	b.take(10)
	b.give(10)
	select {
	case <-fired:
		t.Fatal("idle with a request in flight")
	case <-time.After(idleQuiet + 200*time.Millisecond):
	}
	b.give(10)
	select {
	case <-fired:
	case <-time.After(5 * time.Second):
		t.Fatal("not idle a second after the last request")
	}
	b.take(10)
	b.give(10)
	b.stop()
	select {
	case <-fired:
		t.Fatal("idle after stop")
	case <-time.After(idleQuiet + 200*time.Millisecond):
	}
}
