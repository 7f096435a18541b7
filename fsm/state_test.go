package fsm_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/fsm"
)

func TestWithDefaults(t *testing.T) {
	// The defaults doc.go promises; the runtime records the result in
	// session.started, so replay decides with the same values.
	defaults := events.DeciderOptions{BackoffBaseMs: 1000, BackoffMaxMs: 30000, MaxAttempts: 5, StormLimit: 5,
		StormWindowMs: 30000, PingFailures: 3, StableMs: 30000, DecisionVersion: fsm.DecisionVersion}
	set := events.DeciderOptions{BackoffBaseMs: 10, BackoffMaxMs: 20, MaxAttempts: 2, StormLimit: 3,
		StormWindowMs: 40, PingFailures: 1, StableMs: 50, DecisionVersion: 7}
	negative := events.DeciderOptions{BackoffBaseMs: -1, BackoffMaxMs: -1, MaxAttempts: -1, StormLimit: -1,
		StormWindowMs: -1, PingFailures: -1, StableMs: -1}
	cases := []struct {
		name    string
		in, out events.DeciderOptions
	}{
		{"zero takes the defaults", events.DeciderOptions{}, defaults},
		{"set values are kept", set, set},
		{"negative values take the defaults", negative, defaults},
	}
	for _, c := range cases {
		if got := fsm.WithDefaults(c.in); got != c.out {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.out)
		}
	}
}

func transitioned(server string, at int64, p *events.ServerTransitioned) events.Event {
	return events.Event{Kind: events.KindServerTransitioned, Server: server, Time: at, Payload: p}
}

func TestEvolveTransitionWithoutAttemptKeepsTheAttempt(t *testing.T) {
	// Evolve folds any journal: a transition that names no attempt is about
	// the server's current one, whose number stale inputs are judged by.
	st := fsm.Evolve(fsm.State{}, transitioned("s", 1, &events.ServerTransitioned{
		From: events.StateConfiguring, To: events.StateLaunching, Trigger: string(fsm.TrigAdmit), Attempt: 3}))
	st = fsm.Evolve(st, transitioned("s", 2, &events.ServerTransitioned{
		From: events.StateLaunching, To: events.StateStopped, Trigger: string(fsm.TrigStop), Reason: events.ReasonStopRequested}))
	srv, _ := st.Server("s")
	if got, want := srv.Attempt, 3; got != want {
		t.Errorf("attempt %d after a transition naming none, want %d", got, want)
	}
}

func TestLaunchHistoryKeepsTheNewest64(t *testing.T) {
	// A server relaunched forever keeps a bounded history of its launch
	// times, newest last: the storm breaker only reads the newest.
	st := fsm.State{}
	for i := int64(1); i <= 100; i++ {
		st = fsm.Evolve(st, transitioned("s", i, &events.ServerTransitioned{
			From: events.StateReconnecting, To: events.StateLaunching, Trigger: string(fsm.TrigRetry), Attempt: int(i)}))
	}
	srv, _ := st.Server("s")
	if got, want := len(srv.Launches), 64; got != want {
		t.Fatalf("%d launch times kept, want %d", got, want)
	}
	if first, last := srv.Launches[0], srv.Launches[63]; first != 37 || last != 100 {
		t.Errorf("launch times kept run %d..%d, want 37..100", first, last)
	}
}

func TestCheckOptions(t *testing.T) {
	for _, ok := range []events.DeciderOptions{
		{},
		{BackoffBaseMs: -1, StormLimit: -1},
		{BackoffBaseMs: fsm.MaxOptionMs, BackoffMaxMs: fsm.MaxOptionMs, StormWindowMs: fsm.MaxOptionMs, StableMs: fsm.MaxOptionMs, StormLimit: fsm.MaxStormLimit},
	} {
		if err := fsm.CheckOptions(ok); err != nil {
			t.Errorf("CheckOptions(%+v) = %v, want nil", ok, err)
		}
	}
	for field, bad := range map[string]events.DeciderOptions{
		"backoff_base_ms": {BackoffBaseMs: fsm.MaxOptionMs + 1},
		"backoff_max_ms":  {BackoffMaxMs: 1 << 62},
		"storm_window_ms": {StormWindowMs: fsm.MaxOptionMs + 1},
		"stable_ms":       {StableMs: fsm.MaxOptionMs + 1},
		"storm_limit":     {StormLimit: fsm.MaxStormLimit + 1},
	} {
		err := fsm.CheckOptions(bad)
		if !errors.Is(err, fsm.ErrOptions) || !strings.Contains(err.Error(), field) {
			t.Errorf("CheckOptions(%+v) = %v, want ErrOptions naming %s", bad, err, field)
		}
	}
}

// TestStormLimitAtMaximum: the launches a server keeps are enough for the
// largest storm limit CheckOptions accepts: a server launched that many
// times within the window in this session is held.
func TestStormLimitAtMaximum(t *testing.T) {
	o := fsm.WithDefaults(events.DeciderOptions{StormLimit: fsm.MaxStormLimit, StormWindowMs: 1000})
	st := fsm.State{}
	for i := int64(1); i <= 2*fsm.MaxStormLimit; i++ {
		st = fsm.Evolve(st, transitioned("s", i, &events.ServerTransitioned{
			From: events.StateReconnecting, To: events.StateLaunching, Trigger: string(fsm.TrigRetry), Attempt: int(i)}))
	}
	srv, _ := st.Server("s")
	if held, _ := fsm.StormHold(o, srv.Launches, nil, 2*fsm.MaxStormLimit); !held {
		t.Fatalf("%d launches kept of %d in the window, limit %d: not held", len(srv.Launches), 2*fsm.MaxStormLimit, fsm.MaxStormLimit)
	}
}

// TestReconnectForgetsCrashes: an explicit reconnect forgets the crashes
// of the servers it acts on, and only those: a named one (with
// failed_only, only if failed), or with no name every failed server of
// the config.
func TestReconnectForgetsCrashes(t *testing.T) {
	cfg := func(names ...string) *events.ConfigObserved {
		o := &events.ConfigObserved{Trigger: "start"}
		for _, n := range names {
			o.Servers = append(o.Servers, events.ServerConfig{Name: n, Transport: events.TransportStdio, Command: n})
		}
		return o
	}
	ev := func(at int64, server string, p events.Payload) events.Event {
		return events.Event{Kind: p.Kind(), Server: server, Time: at, Payload: p}
	}
	crash := func(at int64, server string) events.Event {
		return ev(at, server, &events.ServerTransitioned{From: events.StateLaunching, To: events.StateReconnecting, Trigger: string(fsm.TrigFail)})
	}
	exhaust := func(at int64, server string) events.Event {
		return ev(at, server, &events.ServerTransitioned{From: events.StateReconnecting, To: events.StateFailed, Trigger: string(fsm.TrigExhaust)})
	}
	var st fsm.State
	for _, e := range []events.Event{
		ev(0, "", &events.SessionStarted{Seed: 1}),
		ev(0, "", cfg("up", "down", "gone")),
		crash(1, "up"),                       // reconnecting
		crash(2, "down"), exhaust(2, "down"), // failed
		crash(3, "gone"), exhaust(3, "gone"), // failed, then out of the config
		ev(4, "", cfg("up", "down")),
	} {
		st = fsm.Evolve(st, e)
	}
	crashes := func(st fsm.State) map[string]int {
		out := map[string]int{}
		for _, n := range st.Names() {
			s, _ := st.Server(n)
			out[n] = len(s.Crashes)
		}
		return out
	}
	for _, c := range []struct {
		name string
		in   events.Event
		want map[string]int
	}{
		{"every failed server", ev(5, "", &events.ReconnectRequested{FailedOnly: true}), map[string]int{"up": 1, "down": 0, "gone": 1}},
		{"named, failed only, not failed", ev(5, "up", &events.ReconnectRequested{FailedOnly: true}), map[string]int{"up": 1, "down": 1, "gone": 1}},
		{"named, failed only, failed", ev(5, "down", &events.ReconnectRequested{FailedOnly: true}), map[string]int{"up": 1, "down": 0, "gone": 1}},
		{"named", ev(5, "up", &events.ReconnectRequested{}), map[string]int{"up": 0, "down": 1, "gone": 1}},
	} {
		got := fsm.Evolve(st.Clone(), c.in)
		if g := crashes(got); !reflect.DeepEqual(g, c.want) {
			t.Errorf("%s: crashes %v, want %v", c.name, g, c.want)
		}
		for n, k := range c.want {
			if s, _ := got.Server(n); k == 0 && s.Reconnected != 5 || k != 0 && s.Reconnected != 0 {
				t.Errorf("%s: %s reconnected at %d", c.name, n, s.Reconnected)
			}
		}
	}
	if g := crashes(st); !reflect.DeepEqual(g, map[string]int{"up": 1, "down": 1, "gone": 1}) {
		t.Errorf("Evolve changed the state it was given: %v", g)
	}
}
