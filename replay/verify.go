package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/fsm"
)

// Verify re-runs fsm.Decide on every recorded input of session, in order,
// and compares the decisions with the recorded ones (those following the
// input with Cause = its seq). It returns nil when they agree, and the
// first divergence as a *MismatchError wrapping ErrNondeterminism.
func Verify(ctx context.Context, r Reader, session uuid.UUID) error {
	evs, err := Session(ctx, r, session)
	if err != nil {
		return err
	}
	return VerifyEvents(evs)
}

// VerifyEvents is Verify over a session's events already in memory (an
// exported JSONL file, say), in seq order.
func VerifyEvents(evs []events.Event) error {
	var st fsm.State
	i := 0
	for i < len(evs) {
		in := evs[i]
		if !in.Kind.IsInput() {
			// A decision no recorded input caused: the decider would never
			// make it.
			return &MismatchError{Kind: Missing, Input: in, Seq: in.Seq, Recorded: &evs[i],
				Err: fmt.Errorf("decision seq %d follows no input that caused it", in.Seq)}
		}
		decided, derr := fsm.Decide(st, in)
		j := i + 1
		for j < len(evs) && !evs[j].Kind.IsInput() && evs[j].Cause == in.Seq {
			j++
		}
		recorded := evs[i+1 : j]
		if derr != nil {
			return &MismatchError{Kind: Refused, Input: in, Seq: in.Seq, Err: derr}
		}
		if err := compare(in, recorded, decided); err != nil {
			var me *MismatchError
			if errors.As(err, &me) && me.Kind == Extra && j < len(evs) && !evs[j].Kind.IsInput() {
				// The record has a decision where the decider makes one
				// more of this input, but it names another cause.
				me.Recorded = &evs[j]
				me.Err = fmt.Errorf("the recorded decision names seq %d as its cause, not input seq %d", evs[j].Cause, in.Seq)
			}
			return err
		}
		st = fsm.Evolve(st, in)
		for _, d := range recorded {
			st = fsm.Evolve(st, d)
		}
		i = j
	}
	return nil
}

// compare matches recorded and decided decisions pairwise by kind, server,
// time and payload (not by ID or position, which the journal assigns).
func compare(in events.Event, recorded, decided []events.Event) error {
	n := max(len(recorded), len(decided))
	for k := 0; k < n; k++ {
		if k >= len(decided) {
			return &MismatchError{Kind: Missing, Input: in, Seq: recorded[k].Seq, Recorded: &recorded[k]}
		}
		if k >= len(recorded) {
			seq := in.Seq + uint64(k) + 1
			d := decided[k]
			d.Seq = seq
			return &MismatchError{Kind: Extra, Input: in, Seq: seq, Decided: &d}
		}
		rec, dec := recorded[k], decided[k]
		if rec.Kind != dec.Kind || rec.Server != dec.Server || rec.Time != dec.Time || !reflect.DeepEqual(rec.Payload, dec.Payload) {
			dec.Seq, dec.ID, dec.GPos = rec.Seq, rec.ID, rec.GPos
			return &MismatchError{Kind: Different, Input: in, Seq: rec.Seq, Recorded: &rec, Decided: &dec}
		}
	}
	return nil
}

// describe renders an event as "kind server payload-json".
func describe(e *events.Event) string {
	p, _ := json.Marshal(e.Payload)
	s := string(e.Kind)
	if e.Server != "" {
		s += " " + e.Server
	}
	return s + " " + string(p)
}

// Compare checks that got (a session re-enacted by runtime.Reenact, or
// re-imported) holds the same decisions as recorded, input by input. IDs,
// sessions and global positions may differ; kinds, servers, times and
// payloads may not.
func Compare(recorded, got []events.Event) error {
	gi := 0
	for ri := 0; ri < len(recorded); {
		in := recorded[ri]
		rj := ri + 1
		for rj < len(recorded) && !recorded[rj].Kind.IsInput() {
			rj++
		}
		if gi >= len(got) || got[gi].Kind != in.Kind || got[gi].Server != in.Server {
			var g *events.Event
			if gi < len(got) {
				g = &got[gi]
			}
			return &MismatchError{Kind: Missing, Input: in, Seq: in.Seq, Recorded: &recorded[ri], Decided: g,
				Err: fmt.Errorf("input seq %d was not re-enacted", in.Seq)}
		}
		gj := gi + 1
		for gj < len(got) && !got[gj].Kind.IsInput() {
			gj++
		}
		if err := compare(in, recorded[ri+1:rj], got[gi+1:gj]); err != nil {
			return err
		}
		ri, gi = rj, gj
	}
	if gi < len(got) {
		return &MismatchError{Kind: Extra, Input: got[gi], Seq: got[gi].Seq, Decided: &got[gi]}
	}
	return nil
}
