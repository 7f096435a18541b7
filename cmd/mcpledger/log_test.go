package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime/control"
	"github.com/mcpledger/mcpledger/store"
)

func TestLogText(t *testing.T) {
	f := newFixture(t)
	r := runCLI(t, "log", "--journal", f.path)
	if r.err != nil {
		t.Fatal(r.err)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 7 {
		t.Fatalf("%d lines, want 7:\n%s", len(lines), r.stdout)
	}
	want := "2025-05-07T14:02:03.000Z " + shortID(f.stopped) + " #4 server.transitioned github " +
		"from=ready to=reconnecting trigger=transport_closed attempt=2 error={class=transport_closed message=EOF}"
	if lines[3] != want {
		t.Errorf("line 4:\n got %s\nwant %s", lines[3], want)
	}
	if want := "2025-05-07T14:02:02.000Z " + shortID(f.stopped) + ` #3 ping.failed fs attempt=1 consecutive=1 error="deadline exceeded"`; lines[2] != want {
		t.Errorf("line 3:\n got %s\nwant %s", lines[2], want)
	}
	if !strings.HasSuffix(lines[0], "#1 session.started - seed=7 build=test version=v0.0.0") {
		t.Errorf("line 1 = %s", lines[0])
	}
}

func TestLogFilters(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		args []string
		want []string // session short id and seq of each line
	}{
		{nil, []string{"s#1", "s#2", "s#3", "s#4", "s#5", "l#1", "l#2"}},
		{[]string{"--session", "last"}, []string{"l#1", "l#2"}},
		{[]string{"--session", f.stopped.String()}, []string{"s#1", "s#2", "s#3", "s#4", "s#5"}},
		{[]string{"--session", f.live.String()[:8] + f.live.String()[8:23]}, []string{"l#1", "l#2"}},
		{[]string{"--server", "github"}, []string{"s#2", "s#4", "l#2"}},
		{[]string{"--server", "fs"}, []string{"s#3"}},
		{[]string{"--kind", "server.transitioned"}, []string{"s#2", "s#4", "l#2"}},
		{[]string{"--kind", "server.transitioned", "--server", "github", "--session", "last"}, []string{"l#2"}},
		{[]string{"--kind", "session.stopped"}, []string{"s#5"}},
		{[]string{"--server", "nobody"}, nil},
	} {
		r := runCLI(t, append([]string{"log", "--journal", f.path}, c.args...)...)
		if r.err != nil {
			t.Errorf("%q: %v", c.args, r.err)
			continue
		}
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			if line == "" {
				continue
			}
			fields := strings.Fields(line)
			who := map[string]string{shortID(f.stopped): "s", shortID(f.live): "l"}[fields[1]]
			got = append(got, who+fields[2])
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: got %v, want %v", c.args, got, c.want)
		}
	}
}

func TestLogSessionErrors(t *testing.T) {
	f := newFixture(t)
	for arg, want := range map[string]string{
		events.NewID().String(): "no session",
		"ffffffff":              "no session starts with",
		"zz":                    "not a session ID",
		f.stopped.String()[:4]:  "ambiguous", // both fixture sessions start within the same minute
	} {
		r := runCLI(t, "log", "--journal", f.path, "--session", arg)
		if r.err == nil || !strings.Contains(r.err.Error(), want) {
			t.Errorf("--session %s: %v, want an error containing %q", arg, r.err, want)
		}
	}
}

// TestLogJSON checks that each line of log --json is one JSON object with
// the contract's fields, and that it parses back into the stored event.
func TestLogJSON(t *testing.T) {
	f := newFixture(t)
	j, err := store.Open(f.path, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var stored []events.Event
	if err := j.ReadAll(t.Context(), 1, func(e events.Event) error { stored = append(stored, e); return nil }); err != nil {
		t.Fatal(err)
	}
	j.Close()

	r := runCLI(t, "log", "--json", "--journal", f.path)
	if r.err != nil {
		t.Fatal(r.err)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != len(stored) {
		t.Fatalf("%d lines for %d events", len(lines), len(stored))
	}
	for i, line := range lines {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &fields); err != nil {
			t.Fatalf("line %d is not a JSON object: %v\n%s", i+1, err, line)
		}
		for _, k := range []string{"id", "seq", "gpos", "session", "time", "kind", "v", "server", "cause", "payload"} {
			if _, ok := fields[k]; !ok {
				t.Errorf("line %d lacks %q: %s", i+1, k, line)
			}
		}
		var e events.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("line %d does not parse into events.Event: %v", i+1, err)
		}
		if !reflect.DeepEqual(e, stored[i]) {
			t.Errorf("line %d parses into\n%+v\nwant\n%+v", i+1, e, stored[i])
		}
	}
}

// TestLogFollow appends while log --follow runs: the new event is printed,
// and cancelling the context ends the command without an error.
func TestLogFollow(t *testing.T) {
	f := newFixture(t)
	j := mustCreate(t, f.path) // held for writing, its reads served, as `mcpledger run` does
	srv, err := control.Serve(control.Path(f.path), control.Options{
		Reads: readsOf(j)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	pr, pw := io.Pipe()
	e := &env{stdin: strings.NewReader(""), stdout: pw, stderr: io.Discard, getenv: func(string) string { return "" },
		openJournal: store.Open}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- e.run(ctx, []string{"log", "--follow", "--json", "--session", "last", "--journal", f.path})
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	next := func() events.Event {
		t.Helper()
		got := make(chan string, 1)
		go func() {
			if lines.Scan() {
				got <- lines.Text()
			}
			close(got)
		}()
		select {
		case line, ok := <-got:
			if !ok {
				t.Fatalf("output ended: %v", <-done)
			}
			var ev events.Event
			if err := json.Unmarshal([]byte(line), &ev); err != nil {
				t.Fatalf("%v: %s", err, line)
			}
			return ev
		case <-time.After(10 * time.Second):
			t.Fatal("no output within 10s")
		}
		return events.Event{}
	}
	for seq := uint64(1); seq <= 2; seq++ {
		if ev := next(); ev.Session != f.live || ev.Seq != seq {
			t.Fatalf("stored event: %s #%d, want %s #%d", ev.Session, ev.Seq, f.live, seq)
		}
	}
	// An event of the other session is filtered out; the live one shows.
	appendAll(t, j, f.stopped, events.New(t0, "fs", &events.PingFailed{Attempt: 1, Consecutive: 2}))
	appendAll(t, j, f.live, events.New(t0.Add(time.Minute), "fs", &events.PingFailed{Attempt: 1, Consecutive: 3}))
	if ev := next(); ev.Session != f.live || ev.Seq != 3 || ev.Payload.(*events.PingFailed).Consecutive != 3 {
		t.Fatalf("followed event: %+v", ev)
	}
	cancel()
	go io.Copy(io.Discard, pr) // drain, in case anything else was printed
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("log --follow after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("log --follow did not stop within 10s of cancel")
	}
}
