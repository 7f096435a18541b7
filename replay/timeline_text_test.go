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

// TestTimelineDurations checks durations are short and exact enough to
// read: whole µs below a millisecond, three digits up to a minute, then
// minutes and seconds, hours and minutes, a unit left out when it is 0.
func TestTimelineDurations(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{1, "0µs"},
		{840 * time.Microsecond, "840µs"},
		{time.Millisecond - 1, "999µs"},
		{time.Millisecond, "1ms"},
		{316_400 * time.Microsecond, "316ms"},
		{999_499_999, "999ms"},
		{999_500_000, "1s"}, // not 1e+03ms
		{time.Second - 1, "1s"},
		{time.Second, "1s"},
		{1020 * time.Millisecond, "1.02s"},
		{59_940 * time.Millisecond, "59.9s"},
		{time.Minute, "1m"},
		{time.Minute + 999*time.Millisecond, "1m"},
		{time.Minute + time.Second, "1m01s"},
		{2*time.Minute + 5*time.Second, "2m05s"},
		{time.Hour - time.Second, "59m59s"},
		{time.Hour, "1h"},
		{time.Hour + 59*time.Second, "1h"},
		{time.Hour + time.Minute, "1h01m"},
		{25*time.Hour + 30*time.Minute, "25h30m"},
		{-1500 * time.Microsecond, "-1.5ms"},
	} {
		if got := tlDur(int64(c.d)); got != c.want {
			t.Errorf("tlDur(%d ns) = %q, want %q", int64(c.d), got, c.want)
		}
	}
}

// TestTimelineClip checks text is cut to n characters (not bytes), the
// last being … when anything was cut.
func TestTimelineClip(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 3, "abc"},
		{"abcd", 3, "ab…"},
		{"ééé", 3, "ééé"},
		{"éééé", 3, "éé…"},
		{"", 1, ""},
	} {
		if got := tlClip(c.s, c.n); got != c.want {
			t.Errorf("tlClip(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
	if got, want := tlHash("sha256:0123456789abcdef"), "0123456789a…"; got != want {
		t.Errorf("tlHash = %q, want %q: 12 characters without the algorithm", got, want)
	}
}
