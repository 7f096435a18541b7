package main

// Reading the ledger while it runs (issue 18): every read command beside a
// live `run`, `log --follow` across the writer's start, stop, restart and
// kill -9, and a writer that no reader can keep out.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
	"github.com/mcpledger/mcpledger/store"
)

// startRun starts `mcpledger run` in a child process on jp and waits
// until it has started its session.
func startRun(t *testing.T, jp, cfg, dir string) *exec.Cmd {
	t.Helper()
	cmd, stderr := cliProcess(t, nil, "run", "--journal", jp, "--mcp-config", cfg, "--workspace", dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(stderr.String(), "session "); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("run did not start: %s", stderr.String())
		}
	}
	return cmd
}

// stopRun stops run as Ctrl-C does and waits for it.
func stopRun(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("run ended with %v", err)
	}
}

// TestReadCommandsBesideRun: with `run` holding the journal and calls
// made through it, each read command, run in a process of its own,
// succeeds and prints exactly what it prints on a copy of the same file
// with nobody holding it. A second writer fails at once, naming run.
func TestReadCommandsBesideRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mcpledger processes")
	}
	dir := t.TempDir()
	cfg := faultConfig(t, dir, false)
	jp := filepath.Join(dir, "journal.db")
	holder := startRun(t, jp, cfg, dir)
	for i := range 5 {
		if r := runCLI(t, "call", "mcp__good__echo", "--args", fmt.Sprintf(`{"message":"m%d"}`, i), "--journal", jp); r.err != nil {
			t.Fatalf("call through run: %v", r.err)
		}
	}
	html := filepath.Join(t.TempDir(), "t.html")
	commands := [][]string{
		{"log"},
		{"log", "--json", "--session", "last", "--kind", "call.finished"},
		{"log", "--server", "good", "--from", "3"},
		{"sessions"},
		{"sessions", "--json"},
		{"replay", "last"},
		{"replay", "last", "--verify"},
		{"replay", "last", "--until", "5", "--json"},
		{"why", "mcp__good__echo"},
		{"timeline", "last", "-o", html},
		{"export", "last"},
		{"verify"},
	}
	live := make([]result, len(commands))
	for i, args := range commands {
		live[i] = runCLI(t, append(args, "--journal", jp)...)
		if live[i].err != nil {
			t.Errorf("%v beside run: %v", args, live[i].err)
		}
	}
	page, _ := os.ReadFile(html)
	// run is idle (no call in flight, every server ready): a copy of the
	// file now holds what the commands read.
	copied := copyFile(t, jp)
	again := runCLI(t, "log", "--journal", jp)
	if again.stdout != live[0].stdout {
		t.Fatal("run wrote while the commands ran: their answers cannot be compared")
	}
	for i, args := range commands {
		off := runCLI(t, append(args, "--journal", copied)...)
		if off.err != nil {
			t.Errorf("%v offline: %v", args, off.err)
			continue
		}
		if got, want := live[i].stdout, strings.ReplaceAll(off.stdout, copied, jp); got != want {
			t.Errorf("%v beside run printed\n%s\nwhile the same events offline give\n%s", args, got, want)
		}
		if args[0] == "timeline" {
			offPage, _ := os.ReadFile(html)
			if strings.ReplaceAll(string(offPage), copied, jp) != string(page) || len(page) == 0 {
				t.Errorf("timeline beside run wrote another page (%d bytes) than offline (%d bytes)", len(page), len(offPage))
			}
		}
	}
	if n := strings.Count(live[4].stdout, `"id"`); n != 1 {
		t.Errorf("sessions --json beside run lists %d sessions, want 1", n)
	}
	// A second writer is refused at once, naming the holder.
	t0 := time.Now()
	code, stderr := runCLIProcess(t, nil, "run", "--once", "--journal", jp, "--mcp-config", cfg, "--workspace", dir)
	if code == 0 || !strings.Contains(stderr, fmt.Sprintf("process %d (", holder.Process.Pid)) {
		t.Errorf("a second run: exit %d\n%s\nwant it refused naming process %d and its command", code, stderr, holder.Process.Pid)
	} else {
		t.Logf("a second run: %s", stderr)
	}
	if took := time.Since(t0); took > 10*time.Second {
		t.Errorf("the second run gave up after %v", took)
	}
	stopRun(t, holder)
	if r := runCLI(t, "verify", "--journal", jp); r.err != nil {
		t.Errorf("verify once run stopped: %v", r.err)
	}
}

// follower runs `log --follow --json` in a child process and collects the
// events it prints.
type follower struct {
	cmd    *exec.Cmd
	killed atomic.Bool // killed with -9 on purpose: its last line may be cut
	mu     sync.Mutex
	evs    []events.Event
	done   chan struct{}
}

func startFollower(t *testing.T, jp string, extra ...string) *follower {
	t.Helper()
	cmd, _ := cliProcess(t, nil, append([]string{"log", "--follow", "--json", "--journal", jp}, extra...)...)
	cmd.Stdout = nil
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	f := &follower{cmd: cmd, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-f.done
		_ = cmd.Wait()
	})
	go func() {
		defer close(f.done)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var e events.Event
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				if !f.killed.Load() {
					t.Errorf("follower printed a line that is not an event: %q", sc.Text())
				}
				continue
			}
			f.mu.Lock()
			f.evs = append(f.evs, e)
			f.mu.Unlock()
		}
	}()
	return f
}

func (f *follower) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.evs)
}

// stop ends the follower as Ctrl-C does: it must exit 0.
func (f *follower) stop(t *testing.T) []events.Event {
	t.Helper()
	if err := f.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	<-f.done
	if err := f.cmd.Wait(); err != nil {
		t.Errorf("log --follow ended with %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.evs
}

// TestFollowAcrossRestarts: `log --follow --json` started before the
// journal exists prints every event of three runs (the second one killed
// with -9 in the middle of calls) exactly once and in journal order, and
// none of the runs waits for it. A second follower, started later with
// --from, resumes where the first one's output says.
func TestFollowAcrossRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mcpledger processes")
	}
	dir := t.TempDir()
	cfg := faultConfig(t, dir, false)
	jp := filepath.Join(dir, "journal.db")
	f := startFollower(t, jp)
	var answered atomic.Int64
	calls := func(n int) {
		for i := range n {
			if r := runCLI(t, "call", "mcp__good__echo", "--args", fmt.Sprintf(`{"message":"m%d"}`, i), "--journal", jp); r.err == nil {
				answered.Add(1)
			}
		}
	}
	first := startRun(t, jp, cfg, dir)
	calls(3)
	stopRun(t, first)

	second := startRun(t, jp, cfg, dir)
	var wg sync.WaitGroup
	wg.Go(func() { // calls until the kill (a failed call would go on in a session of its own)
		for i := 0; ; i++ {
			if r := runCLI(t, "call", "mcp__good__echo", "--args", fmt.Sprintf(`{"message":"k%d"}`, i), "--journal", jp); r.err != nil {
				return
			}
			answered.Add(1)
		}
	})
	time.Sleep(300 * time.Millisecond)
	if err := second.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = second.Wait()
	wg.Wait()

	third := startRun(t, jp, cfg, dir)
	calls(2)
	stopRun(t, third)

	if answered.Load() < 5 {
		t.Errorf("%d calls answered, want at least the first and third runs' 5", answered.Load())
	}
	want := readEvents(t, jp)
	t.Logf("%d events in %d calls answered", len(want), answered.Load())
	for deadline := time.Now().Add(10 * time.Second); f.count() < len(want) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	got := f.stop(t)
	if len(got) != len(want) {
		t.Errorf("the follower printed %d events, the journal holds %d", len(got), len(want))
	}
	for i := range min(len(got), len(want)) {
		if got[i].ID != want[i].ID || got[i].GPos != want[i].GPos {
			t.Fatalf("event %d: the follower printed %s/%d (gpos %d), the journal holds %s/%d (gpos %d)",
				i, got[i].Session, got[i].Seq, got[i].GPos, want[i].Session, want[i].Seq, want[i].GPos)
		}
	}
	sessions := map[uuid.UUID]bool{}
	for _, e := range got {
		sessions[e.Session] = true
	}
	if len(sessions) < 3 {
		t.Errorf("the follower saw %d sessions, want the three runs'", len(sessions))
	}

	// Resume: a follower from the middle prints the rest, and what a
	// writer appends while it runs.
	mid := want[len(want)/2].GPos
	g := startFollower(t, jp, "--from", fmt.Sprint(mid))
	fourth := startRun(t, jp, cfg, dir)
	stopRun(t, fourth)
	want = readEvents(t, jp)
	for deadline := time.Now().Add(10 * time.Second); g.count() < len(want)-int(mid)+1 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	rest := g.stop(t)
	if len(rest) != len(want)-int(mid)+1 || len(rest) == 0 || rest[0].GPos != mid || rest[len(rest)-1].ID != want[len(want)-1].ID {
		t.Errorf("log --follow --from %d printed %d events, want %d from gpos %d to the end", mid, len(rest), len(want)-int(mid)+1, mid)
	}
}

// TestReaderKilledLeavesNoLock: a reader killed with -9 in the middle of
// a read (here a follower on a journal nobody writes, and a verify) leaves
// nothing locked: a run starts at once.
func TestReaderKilledLeavesNoLock(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mcpledger processes")
	}
	dir := t.TempDir()
	cfg := faultConfig(t, dir, false)
	jp := filepath.Join(dir, "journal.db")
	if r := runCLI(t, "run", "--once", "--journal", jp, "--mcp-config", cfg, "--workspace", dir); r.err != nil {
		t.Fatal(r.err)
	}
	f := startFollower(t, jp)
	for deadline := time.Now().Add(10 * time.Second); f.count() == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	v, _ := cliProcess(t, nil, "verify", "--journal", jp)
	if err := v.Start(); err != nil {
		t.Fatal(err)
	}
	f.killed.Store(true)
	_ = f.cmd.Process.Signal(syscall.SIGKILL)
	_ = v.Process.Signal(syscall.SIGKILL)
	<-f.done
	_ = v.Wait()
	if r := runCLI(t, "run", "--once", "--journal", jp, "--mcp-config", cfg, "--workspace", dir); r.err != nil {
		t.Errorf("run --once after readers were killed: %v", r.err)
	}
}

// TestFollowerNeverBlocksRun: with followers and a looping reader on the
// journal, a run --once starts, appends and ends as if they were not
// there (the old behaviour: the follower's shared lock made run fail after
// a second).
func TestFollowerNeverBlocksRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mcpledger processes")
	}
	dir := t.TempDir()
	cfg := faultConfig(t, dir, false)
	jp := filepath.Join(dir, "journal.db")
	if r := runCLI(t, "run", "--once", "--journal", jp, "--mcp-config", cfg, "--workspace", dir); r.err != nil {
		t.Fatal(r.err)
	}
	f := startFollower(t, jp)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // a reader reading again and again
		for {
			select {
			case <-stop:
				return
			default:
			}
			cmd, _ := cliProcess(t, nil, "log", "--journal", jp)
			cmd.Stdout = io.Discard
			_ = cmd.Run()
		}
	})
	for range 3 {
		if r := runCLI(t, "run", "--once", "--journal", jp, "--mcp-config", cfg, "--workspace", dir); r.err != nil {
			t.Errorf("run --once beside readers: %v", r.err)
		}
	}
	close(stop)
	wg.Wait()
	want := readEvents(t, jp)
	for deadline := time.Now().Add(10 * time.Second); f.count() < len(want) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if got := f.stop(t); len(got) != len(want) {
		t.Errorf("the follower printed %d events of %d", len(got), len(want))
	}
}

// TestCallInterrupted: Ctrl-C on `mcpledger call` of a slow tool, through
// a running run (whose control socket sees the hang-up) and in a one-shot
// session, cancels the call at once (the runtime then sends the server
// notifications/cancelled: runtime's TestCallCancelledByCaller), the
// journal records the call as cancelled rather than finished 20s later,
// and call exits 130.
func TestCallInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mcpledger processes")
	}
	dir := t.TempDir()
	cfg := faultConfig(t, dir, false)
	jp := filepath.Join(dir, "journal.db")
	interrupt := func(args ...string) {
		t.Helper()
		cmd, stderr := cliProcess(t, nil, append([]string{"call", "mcp__good__slow", "--args", `{"ms":20000}`, "--journal", jp}, args...)...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Until the call has started (it is in the journal).
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the call did not start: %s", stderr.String())
			}
			if started(t, jp) > cancelled(t, jp) {
				break
			}
		}
		t0 := time.Now()
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		if took := time.Since(t0); took > 10*time.Second {
			t.Errorf("call took %v to end after Ctrl-C", took)
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 130 {
			t.Errorf("call after Ctrl-C: %v, want exit status 130\n%s", err, stderr.String())
		}
	}
	run := startRun(t, jp, cfg, dir)
	interrupt()
	for deadline := time.Now().Add(10 * time.Second); cancelled(t, jp) < 1 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if n := cancelled(t, jp); n != 1 {
		t.Fatalf("%d calls journaled as cancelled, want 1", n)
	}
	stopRun(t, run)
	interrupt("--mcp-config", cfg, "--workspace", dir)
	if n := cancelled(t, jp); n != 2 {
		t.Errorf("%d calls journaled as cancelled after the one-shot call, want 2", n)
	}
}

// started counts the calls the journal at jp records as started.
func started(t *testing.T, jp string) int {
	t.Helper()
	if _, err := os.Stat(jp); err != nil {
		return 0
	}
	n := 0
	for _, e := range readEvents(t, jp) {
		if _, ok := e.Payload.(*events.CallStarted); ok {
			n++
		}
	}
	return n
}

// cancelled counts the calls the journal at jp records as cancelled.
func cancelled(t *testing.T, jp string) int {
	t.Helper()
	if _, err := os.Stat(jp); err != nil {
		return 0
	}
	n := 0
	for _, e := range readEvents(t, jp) {
		if p, ok := e.Payload.(*events.CallFinished); ok && p.Outcome == events.OutcomeCancelled {
			n++
		}
	}
	return n
}

// readEvents reads every event of the journal at jp, beside its writer or
// not, as the read commands do.
func readEvents(t *testing.T, jp string) []events.Event {
	t.Helper()
	r, err := store.OpenReader(t.Context(), jp, readerOptions(jp))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []events.Event
	if err := r.ReadAll(t.Context(), 1, func(e events.Event) error { out = append(out, e); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLastIsTheAgentsSession: after a run, an offline approve and a
// one-shot call record sessions of their own, but `last` (log, replay,
// why, timeline) and status still mean the run's; sessions names each
// session's kind; status with nothing running says when the run ended.
func TestLastIsTheAgentsSession(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"gh": map[string]any{"command": bin}}})
	if err := os.WriteFile(filepath.Join(ws, ".mcp.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := faultConfig(t, dir, false)
	jp := filepath.Join(dir, "journal.db")
	if r := runCLI(t, "run", "--once", "--journal", jp, "--mcp-config", cfg, "--workspace", ws); r.err != nil {
		t.Fatalf("run --once: %v", r.err)
	}
	if r := runCLI(t, "approve", "gh", "--journal", jp, "--workspace", ws); r.err != nil {
		t.Fatalf("approve: %v %s", r.err, r.stderr)
	}
	if r := runCLI(t, "call", "mcp__good__echo", "--args", `{"message":"x"}`, "--journal", jp, "--mcp-config", cfg, "--workspace", ws); r.err != nil {
		t.Fatalf("one-shot call: %v %s", r.err, r.stderr)
	}
	r := runCLI(t, "sessions", "--json", "--journal", jp)
	var rows []sessionRow
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || len(rows) != 3 {
		t.Fatalf("sessions --json: %v, %d rows\n%s", err, len(rows), r.stdout)
	}
	if rows[0].Kind != "run" || rows[1].Kind != "approve" || rows[2].Kind != "call" {
		t.Errorf("kinds %q %q %q, want run approve call", rows[0].Kind, rows[1].Kind, rows[2].Kind)
	}
	if text := runCLI(t, "sessions", "--journal", jp).stdout; !strings.Contains(text, "KIND") || !strings.Contains(text, " approve ") {
		t.Errorf("sessions does not show kinds:\n%s", text)
	}
	run := rows[0].ID
	if r := runCLI(t, "log", "--session", "last", "--json", "--journal", jp); !strings.Contains(r.stdout, run) || strings.Contains(r.stdout, rows[2].ID) {
		t.Errorf("log --session last is not the run's session %s", run)
	}
	if r := runCLI(t, "replay", "last", "--json", "--journal", jp); r.err != nil || !strings.Contains(r.stdout, run) {
		t.Errorf("replay last: %v, not the run's session", r.err)
	}
	st := runCLI(t, "status", "--journal", jp)
	if st.err != nil || !strings.Contains(st.stdout, "session "+run+" ended ") || !strings.Contains(st.stdout, "no mcpledger is running") || !strings.Contains(st.stdout, "AT THE END") {
		t.Errorf("status with nothing running:\n%s%v", st.stdout, st.err)
	}
	var js statusOut
	if err := json.Unmarshal([]byte(runCLI(t, "status", "--json", "--journal", jp).stdout), &js); err != nil || js.Running || js.Session != run || js.Ended == "" {
		t.Errorf("status --json: %+v, %v", js, err)
	}
	// A session whose process was killed: status says it did not stop.
	holder := startRun(t, jp, cfg, ws)
	_ = holder.Process.Signal(syscall.SIGKILL)
	_ = holder.Wait()
	st = runCLI(t, "status", "--journal", jp)
	if st.err != nil || !strings.Contains(st.stdout, "did not stop") {
		t.Errorf("status after kill -9:\n%s%v", st.stdout, st.err)
	}
}
