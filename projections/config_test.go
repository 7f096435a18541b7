package projections

import (
	"reflect"
	"testing"

	"github.com/mcpledger/mcpledger/events"
)

// reportOf applies evs to a fresh ConfigReport and returns its view.
func reportOf(evs []events.Event) ConfigView {
	r := NewConfigReport()
	for _, e := range evs {
		r.Apply(e)
	}
	return r.View()
}

func invalid(name, why string) events.ServerConfig {
	c := stdio(name)
	c.Invalid = why
	return c
}

// TestConfigReport: the latest reading of the tracked session decides the
// report: its errors, its invalid entries, its shadowed ones, sorted by
// name (invalid before duplicate, duplicates as read).
func TestConfigReport(t *testing.T) {
	j := newJournal()
	s := j.session(1)
	s.start()
	s.in("", &events.ConfigObserved{Trigger: "start", Workspace: "/w",
		Servers: []events.ServerConfig{stdio("ok"), invalid("zz", `server "zz": bad (/a.json:3:9)`), invalid("b", `server "b": "type" "grpc" is not supported (/a.json:2:8)`)},
		Shadowed: []events.ShadowedServer{
			{Name: "b", At: "/c.json:1:2", Winner: "/a.json:2:8"},
			{Name: "a", At: "/b.json:4:5", Winner: "/a.json:9:9"},
			{Name: "b", At: "/b.json:1:2", Winner: "/a.json:2:8"},
		},
		Errors: []string{"/d.json:1:1: unexpected end of JSON input; fix the JSON syntax"}})
	s.tr("b", events.StateConfiguring, events.StateStopped, events.ReasonInvalidConfig, 0, nil) // other kinds change nothing
	want := ConfigView{
		Workspace: "/w",
		Errors:    []string{"/d.json:1:1: unexpected end of JSON input; fix the JSON syntax"},
		Skipped: []SkippedServer{
			{Name: "a", Reason: events.ReasonDuplicate, Detail: `server "a" at /b.json:4:5 is not used: the one at /a.json:9:9 has priority; rename or remove one`},
			{Name: "b", Reason: events.ReasonInvalidConfig, Detail: `server "b": "type" "grpc" is not supported (/a.json:2:8)`},
			{Name: "b", Reason: events.ReasonDuplicate, Detail: `server "b" at /c.json:1:2 is not used: the one at /a.json:2:8 has priority; rename or remove one`},
			{Name: "b", Reason: events.ReasonDuplicate, Detail: `server "b" at /b.json:1:2 is not used: the one at /a.json:2:8 has priority; rename or remove one`},
			{Name: "zz", Reason: events.ReasonInvalidConfig, Detail: `server "zz": bad (/a.json:3:9)`},
		},
	}
	if got := reportOf(j.evs); !reflect.DeepEqual(got, want) {
		t.Fatalf("report:\n%+v\nwant\n%+v", got, want)
	}

	// A later reading replaces the report whole: fixed entries leave it,
	// and its workspace is the report's.
	s.in("", &events.ConfigObserved{Trigger: "watch", Workspace: "/w2", Servers: []events.ServerConfig{stdio("ok"), stdio("b"), invalid("zz", "still bad")}})
	want = ConfigView{Workspace: "/w2", Skipped: []SkippedServer{{Name: "zz", Reason: events.ReasonInvalidConfig, Detail: "still bad"}}}
	if got := reportOf(j.evs); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the fix:\n%+v\nwant\n%+v", got, want)
	}

	// Another session's reading, interleaved in the global log, is not
	// this session's.
	other := j.session(2)
	other.in("", &events.ConfigObserved{Trigger: "start", Servers: []events.ServerConfig{invalid("x", "other")}})
	if got := reportOf(j.evs); !reflect.DeepEqual(got, want) {
		t.Fatalf("another session's reading applied:\n%+v\nwant\n%+v", got, want)
	}

	// A new session starts with an empty report.
	s2 := j.session(3)
	s2.start()
	if got := reportOf(j.evs); !reflect.DeepEqual(got, ConfigView{}) {
		t.Fatalf("a new session kept the old report: %+v", got)
	}
}

// TestConfigReportViewIsACopy: what View returns is the caller's.
func TestConfigReportViewIsACopy(t *testing.T) {
	j := newJournal()
	s := j.session(1)
	s.start()
	s.in("", &events.ConfigObserved{Servers: []events.ServerConfig{invalid("a", "bad")}, Errors: []string{"e"}})
	r := NewConfigReport()
	for _, e := range j.evs {
		r.Apply(e)
	}
	v := r.View()
	v.Skipped[0].Detail, v.Errors[0] = "changed", "changed"
	if got := r.View(); got.Skipped[0].Detail != "bad" || got.Errors[0] != "e" {
		t.Errorf("View shares its slices: %+v", got)
	}
}

// TestSetAppliesConfig: a Set, new or continuing a History, folds the
// config report with the rest.
func TestSetAppliesConfig(t *testing.T) {
	j := newJournal()
	s := j.session(1)
	s.start()
	s.in("", &events.ConfigObserved{Servers: []events.ServerConfig{invalid("a", "bad")}})
	for name, set := range map[string]*Set{"NewSet": NewSet(), "NewSetFrom": NewSetFrom(NewHistory())} {
		for _, e := range j.evs {
			set.Apply(e)
		}
		if got := set.Config.View().Skipped; len(got) != 1 || got[0].Name != "a" {
			t.Errorf("%s: skipped %+v", name, got)
		}
	}
}
