package fsm_test

import (
	"testing"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/fsm"
)

func TestBackoffCeil(t *testing.T) {
	o := fsm.WithDefaults(events.DeciderOptions{})
	want := []int64{1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000}
	for i, w := range want {
		if got := fsm.BackoffCeil(o, i+1); got != w {
			t.Errorf("retry %d: ceil %d, want %d", i+1, got, w)
		}
	}
}

func TestBackoffCeilDoublesUpToItsCap(t *testing.T) {
	// min(max, base·2^(retry-1)) for every retry, including caps so large
	// that doubling a ceiling already at the cap would overflow.
	const huge = int64(1) << 62
	for _, c := range []struct{ base, max int64 }{{1000, 30000}, {1000, 1000}, {3, huge}, {huge, huge}} {
		o := events.DeciderOptions{BackoffBaseMs: c.base, BackoffMaxMs: c.max}
		want := c.base
		for retry := 1; retry <= 70; retry++ {
			if got := fsm.BackoffCeil(o, retry); got != want {
				t.Fatalf("base %d max %d retry %d: ceil %d, want %d", c.base, c.max, retry, got, want)
			}
			if want < c.max {
				want = min(2*want, c.max) // want < max <= 2^62: no overflow
			}
		}
	}
}

func TestJitterIsSeededAndBounded(t *testing.T) {
	// Same inputs, same draw; every draw within [0, ceil]; draws spread over
	// the range rather than clustering (full jitter).
	var lo, hi int
	for attempt := 1; attempt <= 2000; attempt++ {
		a := fsm.Jitter(42, "srv", attempt, 1000)
		if b := fsm.Jitter(42, "srv", attempt, 1000); a != b {
			t.Fatalf("attempt %d: %d then %d", attempt, a, b)
		}
		if a < 0 || a > 1000 {
			t.Fatalf("attempt %d: %d out of [0,1000]", attempt, a)
		}
		if a < 250 {
			lo++
		}
		if a > 750 {
			hi++
		}
	}
	if lo < 350 || hi < 350 {
		t.Errorf("draws not spread: %d below 250, %d above 750 of 2000", lo, hi)
	}
	if fsm.Jitter(42, "a", 1, 1000) == fsm.Jitter(42, "b", 1, 1000) &&
		fsm.Jitter(43, "a", 1, 1000) == fsm.Jitter(42, "a", 1, 1000) {
		t.Error("server and seed do not change the draw")
	}
	if got := fsm.Jitter(1, "x", 1, 0); got != 0 {
		t.Errorf("zero ceiling gave %d", got)
	}
}

func TestStormHold(t *testing.T) {
	o := fsm.WithDefaults(events.DeciderOptions{})
	s := int64(1e9)
	cases := []struct {
		name             string
		session, earlier []int64
		now              int64
		held             bool
		until            int64
	}{
		{"four launches", []int64{1 * s, 2 * s, 3 * s, 4 * s}, nil, 5 * s, false, 0},
		{"five launches", []int64{1 * s, 2 * s, 3 * s, 4 * s, 5 * s}, nil, 6 * s, true, 31 * s},
		{"split across sessions", []int64{4 * s, 5 * s}, []int64{1 * s, 2 * s, 3 * s}, 6 * s, true, 31 * s},
		{"oldest aged out", []int64{1 * s, 2 * s, 3 * s, 4 * s, 5 * s}, nil, 31 * s, false, 0},
		{"a launch at this instant counts", []int64{1 * s, 2 * s, 3 * s, 4 * s, 6 * s}, nil, 6 * s, true, 31 * s},
		{"future launches ignored", nil, []int64{10 * s, 11 * s, 12 * s, 13 * s, 14 * s}, 5 * s, false, 0},
	}
	for _, c := range cases {
		held, until := fsm.StormHold(o, c.session, c.earlier, c.now)
		if held != c.held || until != c.until {
			t.Errorf("%s: held=%v until=%d, want %v %d", c.name, held, until, c.held, c.until)
		}
	}
}
