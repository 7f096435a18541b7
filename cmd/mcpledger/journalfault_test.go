package main

// Journal faults through the CLI (issue 8): a journal locked by another
// mcpledger process, a bit-flipped or truncated file, and a full disk.
// RELIABILITY.md at the repository root records what each shows.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/replay"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
	"github.com/mcpledger/mcpledger/store"
	"github.com/mcpledger/mcpledger/store/storetest"
)

// cliArgsEnv carries the command line of the CLI run in a child process.
const cliArgsEnv = "MCPLEDGER_TEST_CLI_ARGS"

// TestCLIProcess is not a test of its own: it is mcpledger's main, run in
// a child process by cliProcess (this test binary re-executed), so that
// another process holds the journal or a crash cannot take the test down.
func TestCLIProcess(t *testing.T) {
	s := os.Getenv(cliArgsEnv)
	if s == "" {
		t.Skip("the child process of the journal fault tests")
	}
	var args []string
	if err := json.Unmarshal([]byte(s), &args); err != nil {
		fmt.Fprintln(os.Stderr, "bad", cliArgsEnv, err)
		os.Exit(3)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, args, os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		os.Exit(reportError(os.Stderr, err))
	}
	os.Exit(0)
}

// cliProcess returns the command running mcpledger with args in a child
// process (with env added), and a buffer collecting its stderr.
func cliProcess(t *testing.T, env []string, args ...string) (*exec.Cmd, *faultBuffer) {
	t.Helper()
	b, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0], "-test.run=^TestCLIProcess$")
	cmd.Env = append(append(os.Environ(), env...), cliArgsEnv+"="+string(b))
	stderr := &faultBuffer{}
	cmd.Stderr = stderr
	cmd.Stdout = io.Discard
	cmd.WaitDelay = 5 * time.Second
	return cmd, stderr
}

// runCLIProcess runs mcpledger with args in a child process and returns
// its exit code and stderr.
func runCLIProcess(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	cmd, stderr := cliProcess(t, env, args...)
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stderr.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), stderr.String()
	}
	t.Fatalf("running mcpledger %v: %v", args, err)
	return 0, ""
}

type faultBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *faultBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *faultBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// faultConfig writes a config with a healthy test server "good" (and,
// with crashy, one that crashes on start) and returns its path. It points
// HOME and XDG_CONFIG_HOME into dir and tunes the decider for speed.
func faultConfig(t *testing.T, dir string, crashy bool) string {
	t.Helper()
	bin := runtimetest.BuildServer(t)
	servers := map[string]any{"good": map[string]any{"command": bin}}
	if crashy {
		servers["dead"] = map[string]any{"command": bin, "env": map[string]string{"MCPTEST_CRASH_ON_START": "1"}}
	}
	b, _ := json.Marshal(map[string]any{"mcpServers": servers})
	cfg := filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", dir)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "xdg"))
	t.Setenv("MCPLEDGER_DECIDER", `{"backoff_base_ms":10,"backoff_max_ms":20,"max_attempts":3}`)
	return cfg
}

// recordedJournal runs `run --once` on a config with a healthy and a
// crashing server and returns the journal path and the session's ID.
func recordedJournal(t *testing.T) (string, uuid.UUID) {
	t.Helper()
	dir := t.TempDir()
	cfg := faultConfig(t, dir, true)
	jp := filepath.Join(dir, "journal.db")
	if r := runCLI(t, "run", "--once", "--journal", jp, "--mcp-config", cfg, "--workspace", dir); r.err == nil {
		t.Fatal("run --once with a crashing server succeeded")
	}
	j, err := store.Open(jp, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ss, err := j.Sessions(t.Context())
	if err != nil || len(ss) != 1 || ss[0].LastSeq < 30 {
		t.Fatalf("sessions %+v, %v; want one of 30 events or more", ss, err)
	}
	return jp, ss[0].Session
}

func copyFile(t *testing.T, from string) string {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(t.TempDir(), "copy.db")
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return to
}

func fileSessions(t *testing.T, path string) []store.SessionInfo {
	t.Helper()
	j, err := store.Open(path, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ss, err := j.Sessions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return ss
}

// TestJournalBitFlips: a flipped bit in a record makes verify fail naming
// the first bad record (session and seq), and run refuses the journal
// without appending to it.
func TestJournalBitFlips(t *testing.T) {
	jp, sid := recordedJournal(t)
	for _, seqs := range [][]uint64{{1}, {12}, {12, 20}, {25, 7}} {
		bad := copyFile(t, jp)
		for _, s := range seqs {
			storetest.FlipRecordByte(t, bad, sid, s)
		}
		first := min(seqs[0], seqs[len(seqs)-1])
		r := runCLI(t, "verify", "--journal", bad)
		verr := r.err
		var ce *store.CorruptError
		if !errors.As(r.err, &ce) || ce.Session != sid || ce.Seq != first || exitCode(r.err) != 1 {
			t.Errorf("flipped %v: verify said %v, want session %s seq %d", seqs, r.err, sid, first)
		}
		for _, want := range []string{bad, "session " + sid.String(), fmt.Sprintf("seq %d ", first), "CRC mismatch"} {
			if r.err != nil && !strings.Contains(r.err.Error(), want) {
				t.Errorf("flipped %v: %q does not name %q", seqs, r.err, want)
			}
		}

		before := fileSessions(t, bad)
		dir := t.TempDir()
		cfg := faultConfig(t, dir, false)
		r = runCLI(t, "run", "--once", "--journal", bad, "--mcp-config", cfg, "--workspace", dir)
		if !errors.Is(r.err, store.ErrCorrupt) {
			t.Errorf("flipped %v: run on the damaged journal: %v, want a refusal naming the damage", seqs, r.err)
		}
		if after := fileSessions(t, bad); len(after) != len(before) || after[len(after)-1] != before[len(before)-1] {
			t.Errorf("flipped %v: run appended to the damaged journal: %d sessions, had %d", seqs, len(after), len(before))
		}
		t.Logf("flipped %v: verify: %v; run: %v", seqs, errLine(verr), errLine(r.err))
	}
}

// TestJournalTruncated: a journal file cut short makes verify and run fail
// cleanly, naming the file (in a child process, so that a crash is seen,
// not suffered).
func TestJournalTruncated(t *testing.T) {
	jp, _ := recordedJournal(t)
	data, err := os.ReadFile(jp)
	if err != nil {
		t.Fatal(err)
	}
	used := len(data)
	for used > 4096 && bytes.Count(data[used-4096:used], []byte{0}) == 4096 {
		used -= 4096
	}
	for _, cut := range []int{4095, 2 * 4096, used / 2} {
		bad := filepath.Join(t.TempDir(), "cut.db")
		if err := os.WriteFile(bad, data[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"verify"}, {"log"}, {"run", "--once"}} {
			args := append(args, "--journal", bad)
			if args[0] == "run" {
				dir := t.TempDir()
				args = append(args, "--mcp-config", faultConfig(t, dir, false), "--workspace", dir)
			}
			code, stderr := runCLIProcess(t, nil, args...)
			first := strings.SplitN(strings.TrimSpace(stderr), "\n", 2)[0]
			switch {
			case strings.Contains(stderr, "fatal error") || strings.Contains(stderr, "panic:") || strings.Contains(stderr, "unexpected fault"):
				t.Errorf("%s on a journal cut to %d of %d bytes crashed (exit %d): %s", args[0], cut, used, code, first)
			case code == 0:
				t.Errorf("%s on a journal cut to %d of %d bytes succeeded", args[0], cut, used)
			case !strings.Contains(stderr, bad) || !strings.Contains(stderr, "truncated") || !strings.Contains(stderr, "corrupt"):
				t.Errorf("%s on a journal cut to %d of %d bytes: exit %d, %s; want the file named as corrupt, truncated", args[0], cut, used, code, first)
			default:
				t.Logf("%s, cut to %d of %d bytes: exit %d: %s", args[0], cut, used, code, first)
			}
		}
	}
}

// TestJournalFull: `mcpledger run` on a journal capped by MaxSize (set
// through the journal opener the CLI takes), with calls made through its
// control socket until the journal is full. Once it is, calls fail with a
// clear error, the runtime admits no new work and status says it is
// degraded; run ends with the error (the cap never lifts: a disk that
// frees space is TestJournalDiskFull); and after reopening, every call
// that was answered has its call.finished, and the journal verifies.
func TestJournalFull(t *testing.T) {
	dir := t.TempDir()
	cfg := faultConfig(t, dir, false)
	jp := filepath.Join(dir, "journal.db")
	const maxSize = 256 << 10
	var stdout, stderr faultBuffer
	e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: os.Getenv,
		openJournal: func(path string, o *store.Options) (*store.Journal, error) {
			var opts store.Options
			if o != nil {
				opts = *o
			}
			if !opts.ReadOnly {
				opts.MaxSize = maxSize
			}
			return store.Open(path, &opts)
		}}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- e.run(ctx, []string{"run", "--journal", jp, "--mcp-config", cfg, "--workspace", dir, "--verbose"})
	}()
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(stderr.String(), "session "); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("run did not start: %s", stderr.String())
		}
	}

	// Calls with arguments of 2 KB each, until one fails.
	pad := strings.Repeat("p", 2000)
	var acked []string
	var callErr error
	t0 := time.Now()
	for i := 0; i < 2000 && time.Since(t0) < 60*time.Second; i++ {
		msg := fmt.Sprintf("ack-%04d-%s", i, pad)
		args, _ := json.Marshal(map[string]string{"message": msg})
		r := runCLI(t, "call", "mcp__good__echo", "--args", string(args), "--journal", jp)
		if r.err != nil {
			callErr = r.err
			break
		}
		if strings.TrimSpace(r.stdout) != msg {
			t.Fatalf("call %d printed %.40q", i, r.stdout)
		}
		acked = append(acked, msg)
	}
	if callErr == nil {
		t.Fatalf("%d calls and the journal never filled", len(acked))
	}
	if !strings.Contains(callErr.Error(), "journal") || !strings.Contains(callErr.Error(), "maximum size") {
		t.Errorf("the call that found the journal full: %v", callErr)
	}
	// No new work: a second call fails the same way, fast.
	t1 := time.Now()
	r := runCLI(t, "call", "mcp__good__echo", "--args", `{"message":"after"}`, "--journal", jp)
	if r.err == nil || !strings.Contains(r.err.Error(), "journal") || time.Since(t1) > 5*time.Second {
		t.Errorf("a call on the full journal: %v after %v", r.err, time.Since(t1))
	}
	if !strings.Contains(stderr.String(), "journal append failed") {
		t.Errorf("run's log does not say the journal failed:\n%s", stderr.String())
	}
	// The server's process group, to end it should run hang.
	r = runCLI(t, "status", "--json", "--journal", jp)
	var st struct {
		Servers []struct{ PID int }
		Journal *struct {
			Degraded bool
			Error    string
		}
	}
	_ = json.Unmarshal([]byte(r.stdout), &st)
	if st.Journal == nil || !st.Journal.Degraded || !strings.Contains(st.Journal.Error, "maximum size") {
		t.Errorf("status --json with the journal full: %+v, want it degraded by the full journal", st.Journal)
	}

	cancel()
	var runErr error
	select {
	case runErr = <-done:
		if !errors.Is(runErr, store.ErrFull) {
			t.Errorf("run ended with %v, want the full journal", runErr)
		}
	case <-time.After(10 * time.Second):
		var stacks bytes.Buffer
		_ = pprof.Lookup("goroutine").WriteTo(&stacks, 1)
		for _, s := range st.Servers { // do not leave them running
			if s.PID > 0 {
				_ = syscall.Kill(-s.PID, syscall.SIGKILL)
			}
		}
		t.Fatalf("run did not end within 10 s of the interrupt once the journal was full; goroutines:\n%s", stacks.String())
	}
	t.Logf("%d calls answered, then: %v; run: %v", len(acked), errLine(callErr), errLine(runErr))

	// Reopen without the cap: everything answered is there.
	j, err := store.Open(jp, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if _, err := j.Verify(t.Context()); err != nil {
		t.Errorf("verify after the journal filled: %v", err)
	}
	ss, err := j.Sessions(t.Context())
	if err != nil || len(ss) != 1 {
		t.Fatalf("sessions %+v, %v", ss, err)
	}
	started := map[string]string{}  // call ID → message
	finished := map[string]string{} // call ID → outcome
	err = j.ReadSession(t.Context(), ss[0].Session, 1, func(e events.Event) error {
		switch p := e.Payload.(type) {
		case *events.CallStarted:
			var a struct{ Message string }
			_ = json.Unmarshal([]byte(p.Args.Text), &a)
			started[p.CallID] = a.Message
		case *events.CallFinished:
			finished[p.CallID] = p.Outcome
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	okByMsg := map[string]bool{}
	for id, msg := range started {
		if finished[id] == events.OutcomeOK {
			okByMsg[msg] = true
		}
	}
	lost := 0
	for _, msg := range acked {
		if !okByMsg[msg] {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d answered calls have no call.finished ok in the journal", lost, len(acked))
	}
	if err := replay.Verify(t.Context(), j, ss[0].Session); err != nil {
		t.Errorf("the session does not replay: %v", err)
	}
	t.Logf("journal %d events in %d bytes; %d answered calls, %d lost", ss[0].LastSeq, fileSize(t, jp), len(acked), lost)
}

// TestStormBreakerAcrossRunRestarts: a server that crashes on start is
// launched at most storm_limit times per window over three runs of
// `mcpledger run --once` on one journal: the first run's launches hold
// it in the next two.
func TestStormBreakerAcrossRunRestarts(t *testing.T) {
	dir := t.TempDir()
	bin := runtimetest.BuildServer(t)
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"good": map[string]any{"command": bin},
		"loop": map[string]any{"command": bin, "env": map[string]string{"MCPTEST_CRASH_ON_START": "1"}},
	}})
	cfg := filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", dir)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "xdg"))
	t.Setenv("MCPLEDGER_DECIDER", `{"backoff_base_ms":10,"backoff_max_ms":20,"max_attempts":100,"storm_limit":4,"storm_window_ms":60000}`)
	jp := filepath.Join(dir, "journal.db")
	for i := 1; i <= 3; i++ {
		r := runCLI(t, "run", "--once", "--journal", jp, "--mcp-config", cfg, "--workspace", dir)
		if r.err != nil || !strings.Contains(r.stdout, "storm_hold") {
			t.Fatalf("run %d: %v\n%s%s", i, r.err, r.stdout, r.stderr)
		}
	}
	j, err := store.Open(jp, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	spawns := map[uuid.UUID]int{}
	var order []uuid.UUID
	err = j.ReadAll(t.Context(), 0, func(e events.Event) error {
		if _, ok := spawns[e.Session]; !ok {
			order = append(order, e.Session)
			spawns[e.Session] = 0
		}
		if e.Kind == events.KindProcessSpawned && e.Server == "loop" {
			spawns[e.Session]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, s := range order {
		got = append(got, spawns[s])
	}
	if len(got) != 3 || got[0] != 4 || got[1] != 0 || got[2] != 0 {
		t.Errorf("launches of the crashing server per run: %v, want [4 0 0]", got)
	}
	t.Logf("launches per run: %v", got)
}

func fileSize(t *testing.T, path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// errLine is err's message on one line (or "ok").
func errLine(err error) string {
	if err == nil {
		return "ok"
	}
	s := bufio.NewScanner(strings.NewReader(err.Error()))
	s.Scan()
	return s.Text()
}
