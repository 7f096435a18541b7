package replay

import (
	"strings"
	"testing"
	"time"
)

// TestTimelineTickStepIsRound checks the axis steps are the round ones a
// reader expects (1, 2, 5 of a unit; 15 and 30 of seconds and minutes;
// 3, 6 and 12 hours; a day at most) and that the smallest one of at least
// the asked span is chosen.
func TestTimelineTickStepIsRound(t *testing.T) {
	prev := time.Duration(0)
	for _, s := range strings.Fields("50µs 100µs 200µs 500µs 1ms 2ms 5ms 10ms 20ms 50ms 100ms 200ms 500ms " +
		"1s 2s 5s 10s 15s 30s 1m 2m 5m 10m 15m 30m 1h 2h 3h 6h 12h 24h") {
		step, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, least := range []time.Duration{prev + 1, step} {
			if got := time.Duration(tlTickStep(float64(least))); got != step {
				t.Errorf("tlTickStep(%s) = %s, want %s", least, got, step)
			}
		}
		prev = step
	}
	if got := time.Duration(tlTickStep(float64(100 * time.Hour))); got != 24*time.Hour {
		t.Errorf("tlTickStep(100h) = %s, want a day", got)
	}
}
