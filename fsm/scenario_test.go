package fsm_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/tools/txtar"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/fsm"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// A scenario file has an -- inputs -- section, one input per line:
//
//	TIME KIND [SERVER] [JSON-PAYLOAD]
//
// TIME is a Go duration since the session start (0s, 1.5s, 250ms). Lines
// starting with # are comments. The -- want -- section is the rendered
// journal: every input and the decisions it caused, then the final state.
// Run with -update to rewrite it, and read the diff.

type transitionKey struct {
	from    events.ServerState
	trigger string
}

func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/scenarios/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	covered := map[transitionKey]bool{}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var inputs, want []byte
			wantIdx := -1
			for i, f := range ar.Files {
				switch f.Name {
				case "inputs":
					inputs = f.Data
				case "want":
					want, wantIdx = f.Data, i
				}
			}
			got := runScenario(t, inputs, covered)
			if *update {
				if wantIdx < 0 {
					ar.Files = append(ar.Files, txtar.File{Name: "want"})
					wantIdx = len(ar.Files) - 1
				}
				ar.Files[wantIdx].Data = got
				if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if !bytes.Equal(got, want) {
				t.Errorf("journal differs from golden (run with -update and read the diff)\n--- got\n%s\n--- want\n%s", got, want)
			}
		})
	}
	if t.Failed() || *update {
		return
	}
	// Every row of the table, and every source state of the fail row,
	// must be exercised by some scenario.
	for _, r := range fsm.Table() {
		any := false
		for _, from := range r.From {
			if covered[transitionKey{from, string(r.Trigger)}] {
				any = true
			} else if r.Trigger == fsm.TrigFail {
				t.Errorf("no scenario covers %s from %s", r.Trigger, from)
			}
		}
		if !any {
			t.Errorf("no scenario covers table row %s (%v → %s)", r.Trigger, r.From, r.To)
		}
	}
}

func runScenario(t *testing.T, inputs []byte, covered map[transitionKey]bool) []byte {
	t.Helper()
	var out bytes.Buffer
	st := fsm.State{}
	var seq uint64
	for n, line := range strings.Split(string(inputs), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		in, err := parseInput(line)
		if err != nil {
			t.Fatalf("inputs line %d: %v", n+1, err)
		}
		seq++
		in.Seq = seq
		before := render(st)
		decs, err := fsm.Decide(st, in)
		again, err2 := fsm.Decide(st, in)
		if fmt.Sprint(err) != fmt.Sprint(err2) || !sameEvents(decs, again) {
			t.Fatalf("line %d: Decide is not deterministic", n+1)
		}
		if render(st) != before {
			t.Fatalf("line %d: Decide modified its state", n+1)
		}
		fmt.Fprintf(&out, "%3d %s %s%s\n", in.Seq, fmtTime(in.Time), in.Kind, srvSuffix(in.Server))
		if err != nil {
			fmt.Fprintf(&out, "    error: %v\n", err)
			seq-- // a refused command is not journaled
			continue
		}
		st = fsm.Evolve(st, in)
		for _, d := range decs {
			seq++
			d.Seq = seq
			if d.Cause != in.Seq || d.Time != in.Time {
				t.Fatalf("decision %s has cause %d time %d, want %d %d", d.Kind, d.Cause, d.Time, in.Seq, in.Time)
			}
			if tr, ok := d.Payload.(*events.ServerTransitioned); ok {
				covered[transitionKey{tr.From, tr.Trigger}] = true
			}
			p, _ := json.Marshal(d.Payload)
			fmt.Fprintf(&out, "%3d   <%d %s%s %s\n", d.Seq, d.Cause, d.Kind, srvSuffix(d.Server), p)
			st = fsm.Evolve(st, d)
		}
	}
	out.WriteString("final:\n")
	out.WriteString(render(st))
	return out.Bytes()
}

func sameEvents(a, b []events.Event) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

func srvSuffix(s string) string {
	if s == "" {
		return ""
	}
	return " " + s
}

func fmtTime(ns int64) string { return "@" + time.Duration(ns).String() }

func render(st fsm.State) string {
	var b strings.Builder
	for _, name := range st.Names() {
		s, _ := st.Server(name)
		fmt.Fprintf(&b, "  %s: %s", name, s.Phase)
		if s.Reason != "" {
			fmt.Fprintf(&b, " (%s)", s.Reason)
		}
		fmt.Fprintf(&b, " attempt=%d retries=%d", s.Attempt, s.Retries)
		if s.Timer != 0 {
			fmt.Fprintf(&b, " timer=%d/%s", s.Timer, s.TimerPurpose)
		}
		if !s.InConfig {
			b.WriteString(" not-in-config")
		}
		if s.Held {
			b.WriteString(" held")
		}
		if len(s.Crashes) > 0 {
			fmt.Fprintf(&b, " crashes=%v", s.Crashes)
		}
		if len(s.Withheld) > 0 {
			fmt.Fprintf(&b, " withheld=%v", s.Withheld)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// parseInput parses "TIME KIND [SERVER] [JSON]".
func parseInput(line string) (events.Event, error) {
	var e events.Event
	rest := line
	var js string
	if i := strings.Index(line, "{"); i >= 0 {
		rest, js = line[:i], line[i:]
	}
	f := strings.Fields(rest)
	if len(f) < 2 || len(f) > 3 {
		return e, fmt.Errorf("want TIME KIND [SERVER] [JSON], got %q", line)
	}
	d, err := time.ParseDuration(f[0])
	if err != nil {
		return e, err
	}
	e.Time = int64(d)
	e.Kind = events.Kind(f[1])
	if len(f) == 3 {
		e.Server = f[2]
	}
	p, err := events.NewPayload(e.Kind)
	if err != nil {
		return e, err
	}
	if js != "" {
		dec := json.NewDecoder(strings.NewReader(js))
		dec.DisallowUnknownFields()
		if err := dec.Decode(p); err != nil {
			return e, fmt.Errorf("%s payload: %w", e.Kind, err)
		}
	}
	if c, ok := p.(*events.ConfigObserved); ok {
		for i := range c.Servers {
			if c.Servers[i].Hash == "" {
				c.Servers[i].Hash = events.ConfigHash(&c.Servers[i])
			}
		}
	}
	e.Payload = p
	return e, nil
}

func TestTransitionRejectsIllegal(t *testing.T) {
	for _, r := range fsm.Table() {
		for _, s := range events.States() {
			to, changed, err := fsm.Transition(s, r.Trigger)
			legal := slices.Contains(r.From, s)
			switch {
			case legal && err != nil:
				t.Errorf("%s from %s: %v", r.Trigger, s, err)
			case legal && changed && to != r.To:
				t.Errorf("%s from %s went to %s, want %s", r.Trigger, s, to, r.To)
			case !legal && !errorsIs(err, fsm.ErrInvalidTransition):
				t.Errorf("%s from %s: got %v, want ErrInvalidTransition", r.Trigger, s, err)
			}
		}
	}
	if _, _, err := fsm.Transition(events.StateReady, "explode"); !errorsIs(err, fsm.ErrInvalidTransition) {
		t.Errorf("unknown trigger: %v", err)
	}
}

func TestMermaidGolden(t *testing.T) {
	got := fsm.Mermaid()
	path := filepath.Join("testdata", "lifecycle.mmd")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("lifecycle table changed; run go test ./fsm -update and review testdata/lifecycle.mmd\n%s", got)
	}
	for _, r := range fsm.Table() {
		if !strings.Contains(got, string(r.To)+": "+string(r.Trigger)) {
			t.Errorf("diagram lacks %s → %s", r.Trigger, r.To)
		}
	}
}
