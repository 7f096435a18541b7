package replay_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/fsm"
	"github.com/mcpledger/mcpledger/replay"
	"github.com/mcpledger/mcpledger/store"
)

// synthSession generates a realistic, replayable session of about n
// events: servers servers start, list tools, serve calls, crash, back off
// and reconnect, with every decision made by the real decider (so Verify
// accepts it).
func synthSession(tb testing.TB, n, servers int) []events.Event {
	tb.Helper()
	sid := uuid.Must(uuid.NewV7())
	var st fsm.State
	var out []events.Event
	now := int64(1_700_000_000_000_000_000)
	add := func(server string, p events.Payload) {
		now += int64(time.Millisecond)
		in := events.Event{Session: sid, Seq: uint64(len(out) + 1), Time: now, Kind: p.Kind(), Server: server, Payload: p, ID: events.NewID()}
		decs, err := fsm.Decide(st, in)
		if err != nil {
			tb.Fatalf("decide %s: %v", in.Kind, err)
		}
		st = fsm.Evolve(st, in)
		out = append(out, in)
		for _, d := range decs {
			d.Seq, d.ID = uint64(len(out)+1), events.NewID()
			st = fsm.Evolve(st, d)
			out = append(out, d)
		}
	}
	add("", &events.SessionStarted{Seed: 42, Options: events.DeciderOptions{MaxAttempts: 1 << 30, StormLimit: 1 << 30, StableMs: 1}})
	cfg := &events.ConfigObserved{Trigger: "start"}
	for i := 0; i < servers; i++ {
		c := events.ServerConfig{Name: fmt.Sprintf("srv%02d", i), Transport: events.TransportStdio, Command: "x"}
		c.Hash = events.ConfigHash(&c)
		cfg.Servers = append(cfg.Servers, c)
	}
	add("", cfg)
	tools := []events.Tool{{Name: "read", Description: "Read a file", InputSchema: `{"type":"object"}`}, {Name: "write", Description: "Write a file"}}
	for call := 0; len(out) < n; call++ {
		for i := 0; i < servers && len(out) < n; i++ {
			name := fmt.Sprintf("srv%02d", i)
			s, _ := st.Server(name)
			switch s.Phase {
			case events.StateLaunching:
				add(name, &events.ProcessSpawned{Attempt: s.Attempt, PID: 1000 + s.Attempt})
			case events.StateHandshaking:
				add(name, &events.HandshakeCompleted{Attempt: s.Attempt, ProtocolVersion: "2025-11-25"})
				add(name, &events.ToolsListed{Attempt: s.Attempt, Trigger: "initial", Tools: tools})
			case events.StateReady:
				if call%7 == 6 {
					add(name, &events.ProcessExited{Attempt: s.Attempt, PID: 1000 + s.Attempt, ExitCode: 1, StderrTail: []string{"boom"}})
					continue
				}
				id := fmt.Sprintf("c%d-%d", call, i)
				add(name, &events.CallStarted{CallID: id, Tool: "read", Name: "mcp__" + name + "__read", Args: events.Blob{Text: `{"path":"a"}`, Size: 12}})
				add(name, &events.CallFinished{CallID: id, Outcome: events.OutcomeOK, Result: events.Blob{Text: `{"content":[]}`, Size: 14}, DurationNs: 1000})
			case events.StateReconnecting:
				add(name, &events.TimerFired{TimerID: s.Timer, Purpose: s.TimerPurpose, Attempt: s.Attempt + 1})
			}
		}
	}
	return out
}

// BenchmarkReplayVerify re-runs the decider on every input of a
// 200,000-event, 20-server session and compares its decisions with the
// recorded ones (in memory: the journal read is BenchmarkReplay in store).
//
//	go test ./replay -run '^$' -bench ReplayVerify -benchtime 5x -count 5
func BenchmarkReplayVerify(b *testing.B) {
	evs := synthSession(b, 200_000, 20)
	if err := replay.VerifyEvents(evs); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := replay.VerifyEvents(evs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(evs))*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkReplayAt folds a 1,000,000-event bbolt journal (50 sessions of
// 20,000 events) to the last event of its last session: status, catalog
// and approvals as they were then.
//
//	go test ./replay -run '^$' -bench ReplayAt -benchtime 3x -count 5
func BenchmarkReplayAt(b *testing.B) {
	path := filepath.Join(b.TempDir(), "journal.db")
	j, err := store.Open(path, &store.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	ctx := context.Background()
	var last []events.Event
	total := 0
	for s := 0; s < 50; s++ {
		evs := synthSession(b, 20_000, 20)
		for k := 0; k < len(evs); k += 5000 {
			end := min(k+5000, len(evs))
			if _, err := j.Append(ctx, evs[0].Session, store.Exact(uint64(k)), evs[k:end]); err != nil {
				b.Fatal(err)
			}
		}
		total += len(evs)
		last = evs
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		snap, err := replay.At(ctx, j, last[0].Session, 0)
		if err != nil {
			b.Fatal(err)
		}
		if len(snap.Status.Servers) != 20 {
			b.Fatalf("%d servers", len(snap.Status.Servers))
		}
	}
	b.ReportMetric(float64(total), "journal-events")
}
