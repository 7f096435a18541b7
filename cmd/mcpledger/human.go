package main

import (
	"strconv"
	"strings"
	"time"
)

// humanDuration is d for a reader: about three significant digits in
// the largest unit that fits (815µs, 12.3ms, 1.2s, 2m3s).
func humanDuration(d time.Duration) string {
	abs := d
	if abs < 0 {
		abs = -abs
	}
	switch {
	case abs < time.Microsecond:
		return d.String()
	case abs < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case abs < 10*time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	case abs < time.Second:
		return d.Round(100 * time.Microsecond).String()
	case abs < 10*time.Second:
		return d.Round(10 * time.Millisecond).String()
	case abs < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// logInstantKeys are the event payload fields (as the events package
// marshals them) that hold unix-ns instants: a text log line shows them
// as times, not as 19-digit numbers.
var logInstantKeys = map[string]bool{
	"at": true, "fire_at": true, "cutoff": true, "since": true, "until": true, "expires_at": true,
	"recent_launches": true, "recent_crashes": true,
}

// humanKey returns the key and value a text log line shows for the
// payload field key with the JSON number num: a *_ns or *_ms duration in
// human units under its name without the unit (duration_ns=815514 is
// duration=815µs), an instant as a time; ok is false for other fields.
func humanKey(key, num string) (string, string, bool) {
	n, ok := parseInt(num)
	if !ok {
		return "", "", false
	}
	switch {
	case strings.HasSuffix(key, "_ns"):
		return strings.TrimSuffix(key, "_ns"), humanDuration(time.Duration(n)), true
	case strings.HasSuffix(key, "_ms"):
		return strings.TrimSuffix(key, "_ms"), humanDuration(time.Duration(n) * time.Millisecond), true
	case logInstantKeys[key] && n > 0:
		return key, formatTime(n), true
	}
	return "", "", false
}

func parseInt(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// humanAge is how long ago something was, to the second (to the minute
// past an hour): 45s, 3m12s, 2h5m.
func humanAge(d time.Duration) string {
	if d >= time.Hour {
		return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
	}
	return d.Round(time.Second).String()
}
