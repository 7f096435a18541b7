package runtime_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
	"github.com/mcpledger/mcpledger/store"
)

// storeJournal adapts *store.Journal to runtime.Journal.
type storeJournal = runtimetest.StoreJournal

func openJournal(t testing.TB) (*store.Journal, storeJournal) { return runtimetest.OpenJournal(t) }

// sessionEvents returns every event of session sid.
func sessionEvents(t testing.TB, j *store.Journal, sid uuid.UUID) []events.Event {
	return runtimetest.SessionEvents(t, j, sid)
}

func kinds(evs []events.Event, server string) []string {
	var out []string
	for _, e := range evs {
		if server != "" && e.Server != server {
			continue
		}
		s := string(e.Kind)
		if p, ok := e.Payload.(*events.ServerTransitioned); ok {
			s += ":" + string(p.To)
		}
		out = append(out, s)
	}
	return out
}

// dumpEvents renders evs one per line, payloads included, for a failing
// test's message.
func dumpEvents(evs []events.Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "  %d %s %s %+v\n", e.Seq, e.Server, e.Kind, e.Payload)
	}
	return b.String()
}

// inOrder reports whether want occurs in got as a subsequence (other
// events, such as a call finishing, may come between).
func inOrder(got []string, want ...string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}
