package store_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/store"
)

// TestReadOneProc: a read longer than a chunk decodes on GOMAXPROCS
// goroutines while the caller delivers; with a single one (a container
// with one CPU) it still delivers every event, in order.
func TestReadOneProc(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second) // a stuck read fails
	defer cancel()
	j := mustOpen(t, tempPath(t), noSync())
	sid := events.NewID()
	const n = 1300 // three chunks
	if _, err := j.Append(ctx, sid, store.NoStream, evs(n)); err != nil {
		t.Fatal(err)
	}
	for name, read := range map[string]func(fn func(events.Event) error) error{
		"ReadSession": func(fn func(events.Event) error) error { return j.ReadSession(ctx, sid, 1, fn) },
		"ReadAll":     func(fn func(events.Event) error) error { return j.ReadAll(ctx, 1, fn) },
	} {
		var got uint64
		err := read(func(e events.Event) error {
			if got++; e.Seq != got {
				t.Fatalf("%s: seq %d at position %d", name, e.Seq, got)
			}
			return nil
		})
		if err != nil || got != n {
			t.Errorf("%s with GOMAXPROCS 1: %d events, %v; want %d", name, got, err, n)
		}
	}
}
