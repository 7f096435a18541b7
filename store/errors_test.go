package store

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
)

// A CorruptError names what it knows of where the damage is, and wraps
// ErrCorrupt and the decoder's error, if any.
func TestCorruptErrorText(t *testing.T) {
	sid := uuid.MustParse("01a21822-620e-7c6e-a6e0-ff4d26e0bff2")
	cause := fmt.Errorf("bad length: %w", events.ErrCorrupt)
	for _, c := range []struct {
		err  CorruptError
		want string
	}{
		{CorruptError{Reason: "stray key"}, "store: corrupt journal: stray key"},
		{CorruptError{Session: sid, Reason: "undecodable head"},
			"store: corrupt journal: session 01a21822-620e-7c6e-a6e0-ff4d26e0bff2 undecodable head"},
		{CorruptError{Seq: 3, Reason: "seq gap"}, "store: corrupt journal: seq 3 seq gap"},
		{CorruptError{GPos: 7, Reason: "global log gap"}, "store: corrupt journal: gpos 7 global log gap"},
		{CorruptError{Session: sid, Seq: 3, GPos: 7, Reason: "undecodable record", Err: cause},
			"store: corrupt journal: session 01a21822-620e-7c6e-a6e0-ff4d26e0bff2 seq 3 gpos 7 undecodable record: bad length: " + events.ErrCorrupt.Error()},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("Error() = %q\nwant      %q", got, c.want)
		}
		var err error = &c.err
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%q does not wrap ErrCorrupt", err)
		}
		if got, want := errors.Is(err, events.ErrCorrupt), c.err.Err != nil; got != want {
			t.Errorf("%q wraps events.ErrCorrupt: %v, want %v", err, got, want)
		}
	}
}

// corruptAt gives a recovered fault the position the read was at, and
// leaves any other error, and a fault whose position is known, alone.
func TestCorruptAt(t *testing.T) {
	sid, other := events.NewID(), events.NewID()
	for _, c := range []struct {
		name string
		err  *CorruptError
		want CorruptError // Session, Seq, GPos after corruptAt
	}{
		{"fault", &CorruptError{fault: true}, CorruptError{Session: sid, Seq: 2, GPos: 9}},
		{"fault with a session", &CorruptError{fault: true, Session: other}, CorruptError{Session: other}},
		{"fault with a seq", &CorruptError{fault: true, Seq: 5}, CorruptError{Seq: 5}},
		{"fault with a gpos", &CorruptError{fault: true, GPos: 4}, CorruptError{GPos: 4}},
		{"not a fault", &CorruptError{}, CorruptError{}},
	} {
		err := corruptAt(fmt.Errorf("read: %w", c.err), sid, 2, 9)
		var ce *CorruptError
		if !errors.As(err, &ce) || ce != c.err {
			t.Fatalf("%s: corruptAt returned %v, not the error it was given", c.name, err)
		}
		if ce.Session != c.want.Session || ce.Seq != c.want.Seq || ce.GPos != c.want.GPos {
			t.Errorf("%s: position %s/%d/%d, want %s/%d/%d", c.name, ce.Session, ce.Seq, ce.GPos, c.want.Session, c.want.Seq, c.want.GPos)
		}
	}
	if err := errors.New("other"); corruptAt(err, sid, 2, 9) != err {
		t.Error("corruptAt changed an error that is not a *CorruptError")
	}
}
