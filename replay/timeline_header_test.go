package replay_test

import (
	"fmt"
	"html"
	"regexp"
	"testing"

	"github.com/mcpledger/mcpledger/events"
)

// tlHeader returns the header's items, term → description.
func tlHeader(page string) map[string]string {
	out := map[string]string{}
	for _, m := range regexp.MustCompile(`<div><dt>([^<]*)</dt><dd title="[^"]*">([^<]*)</dd></div>`).FindAllStringSubmatch(page, -1) {
		out[m[1]] = html.UnescapeString(m[2])
	}
	return out
}

// TestTimelineHeader checks the header says where and how the session ran,
// leaving out what was not recorded.
func TestTimelineHeader(t *testing.T) {
	for _, c := range []struct {
		name    string
		started events.SessionStarted
		stopped bool
		want    map[string]string // "" : no such item
	}{
		{"host and pid", events.SessionStarted{Host: "build-7", PID: 42, Previous: "01a20252-0000"}, true,
			map[string]string{"host": "build-7 · pid 42", "previous": "01a20252-0000", "ended": "09:26:53.001 · shutdown"}},
		{"host only", events.SessionStarted{Host: "build-7"}, true, map[string]string{"host": "build-7", "previous": ""}},
		{"pid only", events.SessionStarted{PID: 42}, true, map[string]string{"host": "pid 42"}},
		{"neither", events.SessionStarted{Command: "serve"}, false,
			map[string]string{"host": "", "command": "serve", "ended": "not recorded: interrupted, or still running"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &tlScene{width: tlScenePx, pxNs: 1024}
			s.add(0, "", &c.started)
			s.call("s", "x", 10, 10, events.OutcomeOK, nil)
			if c.stopped {
				s.add(tlScenePx, "", &events.SessionStopped{Reason: events.ReasonShutdown})
			}
			head := tlHeader(string(tlRender(t, s.evs, nil)))
			for k, want := range c.want {
				if got, ok := head[k]; got != want || ok != (want != "") {
					t.Errorf("%s: %q (shown %v), want %q", k, got, ok, want)
				}
			}
			if got, want := head["recorded"], fmt.Sprintf("%d events · 1 server · 1 call", len(s.evs)); got != want {
				t.Errorf("recorded: %q, want %q", got, want)
			}
		})
	}
}
