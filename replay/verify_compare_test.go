package replay_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/replay"
)

// reenacted is evs as runtime.Reenact would journal them again: a new
// session, new IDs and global positions, the same seqs, kinds, servers,
// times and payloads.
func reenacted(evs []events.Event) []events.Event {
	out := slices.Clone(evs)
	sid := events.NewID()
	for i := range out {
		out[i].Session, out[i].ID, out[i].GPos = sid, events.NewID(), out[i].GPos+1000
	}
	return out
}

func TestCompareIgnoresWhatTheJournalAssigns(t *testing.T) {
	evs := crashLoop(t)
	if err := replay.Compare(evs, reenacted(evs)); err != nil {
		t.Fatalf("Compare of a faithful re-enactment: %v", err)
	}
	if err := replay.Compare(nil, nil); err != nil {
		t.Errorf("Compare of two empty sessions: %v", err)
	}
}

// compareMismatch runs Compare and returns its *MismatchError.
func compareMismatch(t *testing.T, recorded, got []events.Event) *replay.MismatchError {
	t.Helper()
	err := replay.Compare(recorded, got)
	var me *replay.MismatchError
	if !errors.As(err, &me) || !errors.Is(err, replay.ErrNondeterminism) {
		t.Fatalf("Compare = %v, want a *MismatchError wrapping ErrNondeterminism", err)
	}
	return me
}

// An input of the record the re-enactment does not reach, or reaches as
// another input, is missing; the re-enactment's event at its place, if
// any, is the decided side.
func TestCompareReportsAnInputNotReenacted(t *testing.T) {
	rec := crashLoop(t)
	for _, c := range []struct {
		name string
		got  func([]events.Event) []events.Event
		// decided is the seq of the re-enacted event reported at the
		// missing input's place (0: none).
		seq, decided uint64
		// text is what the error says about the two sides.
		text string
	}{
		{"the re-enactment ends before the last input", func(g []events.Event) []events.Event { return g[:47] }, 48, 0,
			`recorded input process.exited crashy {"attempt":2,"pid":864,"exit_code":0,"expected":true} was not re-enacted (re-enacted nothing at its place)`},
		{"the re-enactment is empty", func(g []events.Event) []events.Event { return nil }, 1, 0,
			`recorded input session.started {"seed":1,`},
		{"the re-enactment ends after an input's decisions", func(g []events.Event) []events.Event { return g[:43] }, 44, 0,
			`recorded input stop.requested {"reason":"shutdown","by":"shutdown"} was not re-enacted (re-enacted nothing at its place)`},
		{"another kind of input at its place", func(g []events.Event) []events.Event {
			g[43].Kind = events.KindReconnectRequested
			return g
		}, 44, 44, `was not re-enacted (re-enacted reconnect.requested {`},
		{"the same input about another server", func(g []events.Event) []events.Event {
			g[11].Server = "crashy"
			return g
		}, 12, 12, `recorded input process.exited dead {"attempt":1,"pid":830,"exit_code":3,"stderr_tail":["mcptest: crashing on start as asked"]} was not re-enacted (re-enacted process.exited crashy {`},
	} {
		t.Run(c.name, func(t *testing.T) {
			me := compareMismatch(t, rec, c.got(reenacted(rec)))
			if me.Kind != replay.Missing || me.Seq != c.seq || me.Input.Seq != c.seq || me.Recorded == nil || me.Recorded.Seq != c.seq {
				t.Fatalf("got %s at seq %d (input %d, recorded %v), want missing input at seq %d", me.Kind, me.Seq, me.Input.Seq, me.Recorded, c.seq)
			}
			if c.decided == 0 && me.Decided != nil || c.decided != 0 && (me.Decided == nil || me.Decided.Seq != c.decided) {
				t.Errorf("decided side %+v, want seq %d", me.Decided, c.decided)
			}
			if !strings.Contains(me.Error(), c.text) {
				t.Errorf("error %q does not say %q", me, c.text)
			}
		})
	}
}

// Inputs the re-enactment has past the record's end are extra.
func TestCompareReportsAnInputPastTheRecord(t *testing.T) {
	rec := crashLoop(t)
	got := reenacted(rec)
	me := compareMismatch(t, rec[:47], got)
	if me.Kind != replay.Extra || me.Seq != 48 || me.Decided == nil || me.Decided.Kind != events.KindProcessExited || me.Recorded != nil {
		t.Fatalf("got %s at seq %d (decided %v, recorded %v), want the extra process.exited at seq 48", me.Kind, me.Seq, me.Decided, me.Recorded)
	}
	if want := "re-enacted input process.exited crashy {"; !strings.Contains(me.Error(), want) || !strings.Contains(me.Error(), "is not in the record") {
		t.Errorf("error %q does not say that the %s... is not in the record", me, want)
	}
}

// The decisions of each input are compared as Verify compares them: kind,
// server, time and payload, one by one.
func TestCompareReportsDivergentDecisions(t *testing.T) {
	rec := crashLoop(t)
	for _, c := range []struct {
		name       string
		got        func([]events.Event) []events.Event
		kind       replay.MismatchKind
		seq, input uint64
	}{
		{"a decision at another time", func(g []events.Event) []events.Event {
			g[13].Time++
			return g
		}, replay.Different, 14, 12},
		{"a decision about another server", func(g []events.Event) []events.Event {
			g[45].Server = "crashy"
			return g
		}, replay.Different, 46, 44},
		{"a decision of another kind", func(g []events.Event) []events.Event {
			g[46].Kind = events.KindServerTransitioned
			return g
		}, replay.Different, 47, 44},
		{"a decision with another payload", func(g []events.Event) []events.Event {
			g[8].Payload = &events.ServerTransitioned{From: events.StateLaunching, To: events.StateFailed}
			return g
		}, replay.Different, 9, 8},
		{"the input's last decision left out", func(g []events.Event) []events.Event {
			return slices.Delete(g, 46, 47)
		}, replay.Missing, 47, 44},
		{"the input's only decision left out", func(g []events.Event) []events.Event {
			return slices.Delete(g, 8, 9)
		}, replay.Missing, 9, 8},
		{"a decision added after the input's last", func(g []events.Event) []events.Event {
			return slices.Insert(g, 47, g[46])
		}, replay.Extra, 48, 44},
		{"a decision added to the session's last input", func(g []events.Event) []events.Event {
			return append(g, g[46])
		}, replay.Extra, 49, 48},
	} {
		t.Run(c.name, func(t *testing.T) {
			me := compareMismatch(t, rec, c.got(reenacted(rec)))
			if me.Kind != c.kind || me.Seq != c.seq || me.Input.Seq != c.input {
				t.Fatalf("got %s at seq %d caused by %d, want %s at seq %d caused by %d: %v", me.Kind, me.Seq, me.Input.Seq, c.kind, c.seq, c.input, me)
			}
			if want := fmt.Sprintf("at seq %d (caused by input seq %d ", c.seq, c.input); !strings.Contains(me.Error(), want) ||
				!strings.Contains(me.Error(), string(c.kind)+" decision: recorded ") {
				t.Errorf("error %q does not say %q and %q", me, want, c.kind+" decision")
			}
		})
	}
}
