package replay_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mcpledger/mcpledger/events"
)

// TestTimelineBadCommand: a server whose command is not found shows a
// failed band marked where it failed (the give-up glyph), whose tooltip
// and the band's say it is not retried and what relaunches it; the fixed
// config's launch follows. A crash's band keeps its failure mark.
func TestTimelineBadCommand(t *testing.T) {
	b := newTLBuilder(t, &events.SessionStarted{Seed: 3, Version: "v0.6.0", Command: "run"})
	cfg := func(command string) events.ServerConfig {
		c := events.ServerConfig{Name: "gone", Scope: events.ScopeUser, Transport: events.TransportStdio, Command: command}
		c.Hash = events.ConfigHash(&c)
		return c
	}
	b.at(10*time.Millisecond).in("", &events.ConfigObserved{Trigger: "start", Servers: []events.ServerConfig{cfg("mcp-server-doesnotexist")}})
	b.at(20*time.Millisecond).in("gone", &events.ConnectFailed{Attempt: 1, Phase: "spawn",
		Error: events.ClassifiedError{Class: events.ErrNotFound, Message: `command "mcp-server-doesnotexist" is not in any directory of $PATH`}})
	b.at(5*time.Second).in("", &events.ConfigObserved{Trigger: "watch", Servers: []events.ServerConfig{cfg("/usr/bin/gone")}})
	b.up("gone", 4242, tlTools("search")...)
	page := string(tlRender(t, b.evs, nil))
	mark := tlHover1(t, page, "gone · cannot run as configured at attempt 1 (not_found), not retried: not_found: command")
	if !strings.Contains(mark.title, "fix its \"command\" (or \"cwd\"): a config change relaunches it\n") {
		t.Errorf("mark: %q", mark.title)
	}
	bands := tlHovers(page, "gone · failed, attempt 1")
	if len(bands) != 1 || !strings.Contains(bands[0].title, "\nreason not_found\n") ||
		!strings.HasSuffix(bands[0].title, "\ncannot run as configured: fix its \"command\" (or \"cwd\"); a config change relaunches it") {
		t.Fatalf("failed bands %+v", bands)
	}
	// The band's label starts clear of the glyph on its start (a marked
	// band): 11 px in, not 5.
	if d := bands[0].num(t, "text", "x", 0) - bands[0].num(t, "rect", "x", 0); d != 11 {
		t.Errorf("the failed band's label is %v px in, want 11 (marked)", d)
	}
	if got := strings.Count(page, "cannot run as configured at attempt"); got != 1 {
		t.Errorf("%d marks, want 1", got)
	}
}
