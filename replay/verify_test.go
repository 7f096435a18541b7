package replay_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/replay"
	"github.com/mcpledger/mcpledger/store"
)

// crashLoop is testdata/journals/crash-loop.jsonl: server dead crashes
// three times (inputs 12, 22, 29 each cause a transition, 12 and 22 a
// backoff timer too) and the stop request at 44 causes 45, 46 and 47.
func crashLoop(t *testing.T) []events.Event {
	t.Helper()
	evs := golden(t, "crash-loop.jsonl")
	for i, e := range evs {
		if e.Seq != uint64(i+1) {
			t.Fatalf("crash-loop.jsonl: event %d has seq %d", i, e.Seq)
		}
	}
	for _, c := range []struct {
		seq   uint64
		kind  events.Kind
		cause uint64
	}{{9, events.KindServerTransitioned, 8}, {14, events.KindTimerScheduled, 12}, {44, events.KindStopRequested, 0},
		{46, events.KindServerTransitioned, 44}, {47, events.KindSessionStopped, 44}} {
		if e := evs[c.seq-1]; e.Kind != c.kind || e.Cause != c.cause {
			t.Fatalf("crash-loop.jsonl seq %d is %s caused by %d, the tests expect %s caused by %d", c.seq, e.Kind, e.Cause, c.kind, c.cause)
		}
	}
	return evs
}

// mismatch runs VerifyEvents and returns its *MismatchError, failing the
// test if there is none.
func mismatch(t *testing.T, evs []events.Event) *replay.MismatchError {
	t.Helper()
	err := replay.VerifyEvents(evs)
	var me *replay.MismatchError
	if !errors.As(err, &me) || !errors.Is(err, replay.ErrNondeterminism) {
		t.Fatalf("VerifyEvents = %v, want a *MismatchError wrapping ErrNondeterminism", err)
	}
	return me
}

// A recorded decision whose time is not its input's (the time the decider
// gives every decision) is a different decision, at its own seq.
func TestVerifyReportsADecisionAtAnotherTime(t *testing.T) {
	for _, c := range []struct {
		seq uint64
		// side is how the error shows the decision: kind, server (a
		// session's decision has none), payload.
		side string
	}{{14, "timer.scheduled dead {"}, {47, "session.stopped {"}} {
		seq := c.seq
		evs := crashLoop(t)
		in := evs[evs[seq-1].Cause-1]
		evs[seq-1].Time += int64(time.Millisecond)
		me := mismatch(t, evs)
		if me.Kind != replay.Different || me.Seq != seq || me.Input.Seq != in.Seq {
			t.Fatalf("seq %d moved by 1ms: %s at seq %d caused by %d, want different at seq %d caused by %d: %v",
				seq, me.Kind, me.Seq, me.Input.Seq, seq, in.Seq, me)
		}
		if got, want := me.Recorded.Time, in.Time+int64(time.Millisecond); got != want {
			t.Errorf("recorded time %d, want %d", got, want)
		}
		if got, want := me.Decided.Time, in.Time; got != want {
			t.Errorf("decided time %d, want the input's %d", got, want)
		}
		for _, want := range []string{"different decision", "recorded " + c.side, "decided " + c.side} {
			if !strings.Contains(me.Error(), want) {
				t.Errorf("error %q does not say %q", me, want)
			}
		}
		// Everything else about the two sides agrees.
		if me.Decided.Kind != me.Recorded.Kind || me.Decided.Server != me.Recorded.Server || me.Decided.Seq != seq ||
			me.Decided.ID != me.Recorded.ID || me.Decided.GPos != me.Recorded.GPos {
			t.Errorf("sides differ beyond the time:\nrecorded %+v\ndecided  %+v", me.Recorded, me.Decided)
		}
	}
}

// A recorded decision that follows an input but names another event as its
// cause is not a decision of that input: the decider makes one decision
// more of the input than the record, and replay reports the recorded one
// at that seq with the cause it names.
func TestVerifyReportsADecisionCausedByAnotherEvent(t *testing.T) {
	for _, c := range []struct {
		name              string
		seq, cause, input uint64
	}{
		{"the only decision, caused by the next input", 9, 10, 8},
		{"the second decision, caused by an earlier input", 14, 8, 12},
		{"the last decision, caused by nothing", 47, 0, 44},
		{"a decision caused by itself", 46, 46, 44},
		{"a decision caused by the decision before it", 46, 45, 44},
	} {
		t.Run(c.name, func(t *testing.T) {
			evs := crashLoop(t)
			evs[c.seq-1].Cause = c.cause
			me := mismatch(t, evs)
			if me.Kind != replay.Extra || me.Seq != c.seq || me.Input.Seq != c.input {
				t.Fatalf("got %s at seq %d caused by %d, want extra at seq %d caused by %d: %v", me.Kind, me.Seq, me.Input.Seq, c.seq, c.input, me)
			}
			if me.Recorded == nil || me.Recorded.Seq != c.seq || me.Recorded.Cause != c.cause || me.Decided == nil || me.Decided.Kind != me.Recorded.Kind {
				t.Errorf("sides: recorded %+v, decided %+v; want both the decision at seq %d", me.Recorded, me.Decided, c.seq)
			}
			if want := fmt.Sprintf("names seq %d as its cause, not input seq %d", c.cause, c.input); !strings.Contains(me.Error(), want) {
				t.Errorf("error %q does not say %q", me, want)
			}
		})
	}
}

// A session cut short in the middle of an input's decisions lacks the rest:
// the first the decider makes beyond the record is extra.
func TestVerifyReportsADecisionCutOff(t *testing.T) {
	evs := crashLoop(t)[:46]
	me := mismatch(t, evs)
	if me.Kind != replay.Extra || me.Seq != 47 || me.Input.Seq != 44 || me.Recorded != nil || me.Decided == nil || me.Decided.Kind != events.KindSessionStopped {
		t.Fatalf("got %s at seq %d caused by %d (recorded %v, decided %v), want the extra session.stopped at 47 caused by 44",
			me.Kind, me.Seq, me.Input.Seq, me.Recorded, me.Decided)
	}
	if want := "extra decision: recorded nothing, decided session.stopped {"; !strings.Contains(me.Error(), want) {
		t.Errorf("error %q does not say %q", me, want)
	}
}

// A decision no recorded input caused (it follows an input that decides
// nothing, or opens the session) is missing from what the decider decides.
func TestVerifyReportsADecisionNoInputCaused(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	start := events.New(t0, "", &events.SessionStarted{Seed: 7})
	start.Seq = 1
	stray := events.New(t0.Add(time.Second), "gh", &events.ServerTransitioned{From: events.StateConfiguring, To: events.StateLaunching, Trigger: "admit", Attempt: 1})
	for _, c := range []struct {
		name string
		evs  []events.Event
	}{
		{"after the session's start", []events.Event{start, stray}},
		{"first in the session", []events.Event{stray}},
	} {
		t.Run(c.name, func(t *testing.T) {
			evs := append([]events.Event(nil), c.evs...)
			last := &evs[len(evs)-1]
			last.Seq = uint64(len(evs))
			me := mismatch(t, evs)
			if me.Kind != replay.Missing || me.Seq != last.Seq || me.Recorded == nil || me.Recorded.Kind != last.Kind || me.Decided != nil {
				t.Fatalf("got %s at seq %d (recorded %v, decided %v), want missing at seq %d", me.Kind, me.Seq, me.Recorded, me.Decided, last.Seq)
			}
			for _, want := range []string{"no recorded input causes it", "server.transitioned gh", `"to":"launching"`} {
				if !strings.Contains(me.Error(), want) {
					t.Errorf("error %q does not say %q", me, want)
				}
			}
		})
	}
}

// An input the decider now refuses is reported with the decider's error.
func TestVerifyReportsARefusedInput(t *testing.T) {
	evs := crashLoop(t)
	// Server "gone" is not in the session's config: stopping it is an error.
	evs[43].Server = "gone"
	me := mismatch(t, evs)
	if me.Kind != replay.Refused || me.Seq != 44 || me.Input.Seq != 44 || me.Err == nil {
		t.Fatalf("got %s at seq %d (err %v), want refused at seq 44", me.Kind, me.Seq, me.Err)
	}
	for _, want := range []string{"input seq 44", "stop.requested gone", "is now refused", me.Err.Error()} {
		if !strings.Contains(me.Error(), want) {
			t.Errorf("error %q does not say %q", me, want)
		}
	}
}

// Of two divergences, Verify reports the first.
func TestVerifyReportsTheFirstDivergence(t *testing.T) {
	evs := crashLoop(t)
	evs[23].Time++ // seq 24
	evs[45].Time++ // seq 46
	if me := mismatch(t, evs); me.Seq != 24 {
		t.Errorf("first divergence reported at seq %d, want 24: %v", me.Seq, me)
	}
}

func TestVerifyReadsTheSessionFromTheJournal(t *testing.T) {
	evs := crashLoop(t)
	evs[13].Time++
	j := load(t, evs, golden(t, "reload.jsonl"))
	var me *replay.MismatchError
	if err := replay.Verify(context.Background(), j, evs[0].Session); !errors.As(err, &me) || me.Seq != 14 {
		t.Errorf("Verify of a session with seq 14 moved = %v, want a mismatch at seq 14", err)
	}
	if err := replay.Verify(context.Background(), j, uuid.New()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Verify of an unknown session = %v, want the journal's ErrNotFound", err)
	}
}
