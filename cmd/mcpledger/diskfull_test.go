//go:build linux

package main

// A real full disk (issue 19): `mcpledger run` in a child process, its
// journal on a tmpfs of a few MiB that the test fills. RELIABILITY.md
// records what it shows.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/store"
)

// smallDisk mounts a tmpfs of size bytes on a new directory and returns
// it; the test is skipped where mounting is not allowed (not root, no
// CAP_SYS_ADMIN in the container).
func smallDisk(t *testing.T, size int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		t.Skipf("a real full disk needs a small tmpfs, and mounting one failed (%v): run as root, or in a container with CAP_SYS_ADMIN", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fillDisk writes a file into dir until the file system is full and
// returns its path.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", dir, err)
			}
			return path
		}
	}
}

// statusJSON is what the test reads of `status --json`.
type statusJSON struct {
	Running bool `json:"running"`
	Journal *struct {
		Degraded  bool      `json:"degraded"`
		Since     time.Time `json:"since"`
		Error     string    `json:"error"`
		Attempts  int       `json:"attempts"`
		NextRetry time.Time `json:"next_retry"`
		Backlog   int       `json:"backlog"`
	} `json:"journal"`
	Servers []struct {
		Name    string `json:"name"`
		State   string `json:"state"`
		Attempt int    `json:"attempt"`
		PID     int    `json:"pid"`
	} `json:"servers"`
}

func readStatus(t *testing.T, jp string) statusJSON {
	t.Helper()
	r := runCLI(t, "status", "--json", "--journal", jp)
	var st statusJSON
	if err := json.Unmarshal([]byte(r.stdout), &st); r.err != nil || err != nil {
		t.Fatalf("status --json: %v %v\n%s", r.err, err, r.stdout)
	}
	return st
}

// TestJournalDiskFull: `mcpledger run` with its journal on a real file
// system that fills up. The call that finds the disk full fails with
// ENOSPC and says the journal is retried; `status` (text and --json, from
// the running process) says degraded, why and since when; calls and
// commands are refused meanwhile. The server's process is killed
// meanwhile: its exit is kept, not acted on. Once space is freed, without
// a restart, the journal resumes by itself: the exit is journaled after
// journal.resumed and the server relaunched, and call, reconnect and
// reload work again. After run ends: every answered call has its
// call.finished ok, and verify and replay --verify pass.
func TestJournalDiskFull(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a file system and runs mcpledger for seconds; skipped under -short")
	}
	disk := smallDisk(t, 4<<20)
	dir := t.TempDir()
	cfg := faultConfig(t, dir, false)
	jp := filepath.Join(disk, "journal.db")
	run, stderr := cliProcess(t, nil, "run", "--journal", jp, "--mcp-config", cfg, "--workspace", dir, "--verbose")
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	runDone := make(chan error, 1)
	go func() { runDone <- run.Wait() }()
	defer func() { // never leave it running
		_ = run.Process.Signal(syscall.SIGKILL)
		<-runDone
	}()
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(stderr.String(), "session "); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("run did not start: %s", stderr.String())
		}
	}

	filler := fillDisk(t, disk)
	// Calls with arguments of 2 KB each, until one fails: the journal
	// reuses its free pages first.
	pad := strings.Repeat("p", 2000)
	var acked []string
	var callErr error
	call := func(msg string) error {
		args, _ := json.Marshal(map[string]string{"message": msg})
		r := runCLI(t, "call", "mcp__good__echo", "--args", string(args), "--journal", jp)
		if r.err == nil && strings.TrimSpace(r.stdout) != msg {
			t.Fatalf("call %.20q printed %.40q", msg, r.stdout)
		}
		if r.err == nil {
			acked = append(acked, msg)
		}
		return r.err
	}
	for i := 0; i < 500 && callErr == nil; i++ {
		callErr = call(fmt.Sprintf("ack-%04d-%s", i, pad))
	}
	if callErr == nil {
		t.Fatalf("%d calls and the journal never found the disk full", len(acked))
	}
	for _, want := range []string{"no space left on device", "journal", "retries"} {
		if !strings.Contains(callErr.Error(), want) {
			t.Errorf("the call that found the disk full: %q does not say %q", callErr, want)
		}
	}

	st := readStatus(t, jp)
	if !st.Running || st.Journal == nil || !st.Journal.Degraded || !strings.Contains(st.Journal.Error, "no space left on device") ||
		st.Journal.Since.IsZero() || st.Journal.NextRetry.IsZero() {
		t.Fatalf("status --json with the disk full: %+v", st.Journal)
	}
	r := runCLI(t, "status", "--journal", jp)
	if !strings.Contains(r.stdout, "DEGRADED") || !strings.Contains(r.stdout, "no space left on device") {
		t.Errorf("status with the disk full does not say degraded and why:\n%s", r.stdout)
	}
	t.Logf("status with the disk full:\n%s", r.stdout)
	if err := call("refused"); err == nil || !strings.Contains(err.Error(), "no space left on device") {
		t.Errorf("a call with the disk full: %v", err)
	}
	if r := runCLI(t, "reconnect", "good", "--journal", jp); r.err == nil || !strings.Contains(r.err.Error(), "retries") {
		t.Errorf("reconnect with the disk full: %v", r.err)
	}
	// The server dies while the disk is full: its exit is kept, and it
	// is not relaunched (nothing decided is acted on).
	pid := st.Servers[0].PID
	if pid <= 0 {
		t.Fatalf("good has no pid: %+v", st.Servers)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		st = readStatus(t, jp)
		if st.Journal.Attempts >= 2 && st.Journal.Backlog > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("want 2 retries and the exit kept within 10 s: %+v", st.Journal)
		}
	}
	if s := st.Servers[0]; s.State != string(events.StateReady) || s.Attempt != 1 {
		t.Errorf("good while the disk is full, after its process died: %+v, want as last journaled (ready, attempt 1)", s)
	}

	// Space returns: the journal resumes within the longest backoff.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	for readStatus(t, jp).Journal != nil {
		if time.Since(t0) > 15*time.Second {
			t.Fatalf("the journal did not resume within 15 s of space returning; run's log:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	resumedIn := time.Since(t0)
	// The kept exit is journaled and decided: good is relaunched.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if st := readStatus(t, jp); st.Servers[0].State == string(events.StateReady) && st.Servers[0].Attempt >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("good was not relaunched after the journal resumed: %+v", readStatus(t, jp).Servers)
		}
	}
	if err := call("after-resume"); err != nil {
		t.Errorf("call after the journal resumed: %v", err)
	}
	for _, args := range [][]string{{"reconnect", "good"}, {"reload"}} {
		if r := runCLI(t, append(args, "--journal", jp)...); r.err != nil {
			t.Errorf("%s after the journal resumed: %v", args[0], r.err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if st := readStatus(t, jp); len(st.Servers) == 1 && st.Servers[0].State == string(events.StateReady) && st.Servers[0].PID != pid {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("good is not ready again after reconnect: %+v", readStatus(t, jp).Servers)
		}
	}
	if err := call("after-reconnect"); err != nil {
		t.Errorf("call after reconnect: %v", err)
	}

	_ = run.Process.Signal(syscall.SIGINT)
	select {
	case err := <-runDone:
		if err != nil {
			t.Errorf("run ended with %v after the journal resumed:\n%s", err, stderr.String())
		}
		runDone <- nil // for the deferred kill
	case <-time.After(15 * time.Second):
		t.Fatal("run did not end within 15 s of SIGINT")
	}

	for _, args := range [][]string{{"verify"}, {"replay", "last", "--verify"}, {"timeline", "last", "-o", "-"}, {"why", "mcp__good__echo"}} {
		if r := runCLI(t, append(args, "--journal", jp)...); r.err != nil {
			t.Errorf("%s after the outage: %v\n%s", args[0], r.err, r.stdout)
		}
	}
	if r := runCLI(t, "log", "--kind", "journal.resumed", "--journal", jp); r.err != nil || !strings.Contains(r.stdout, "no space left on device") {
		t.Errorf("log --kind journal.resumed: %v\n%s", r.err, r.stdout)
	}
	j, err := store.Open(jp, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ss, err := j.Sessions(t.Context())
	if err != nil || len(ss) != 1 {
		t.Fatalf("sessions %+v, %v", ss, err)
	}
	started := map[string]string{} // call ID → message
	ok := map[string]bool{}        // message → finished ok
	var resumed []*events.JournalResumed
	exitAfterResume := false
	err = j.ReadSession(t.Context(), ss[0].Session, 1, func(e events.Event) error {
		if p, ok := e.Payload.(*events.ProcessExited); ok && p.PID == pid {
			exitAfterResume = len(resumed) == 1
		}
		switch p := e.Payload.(type) {
		case *events.CallStarted:
			var a struct{ Message string }
			_ = json.Unmarshal([]byte(p.Args.Text), &a)
			started[p.CallID] = a.Message
		case *events.CallFinished:
			if p.Outcome == events.OutcomeOK {
				ok[started[p.CallID]] = true
			}
		case *events.JournalResumed:
			resumed = append(resumed, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	lost := 0
	for _, msg := range acked {
		if !ok[msg] {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d answered calls have no call.finished ok in the journal", lost, len(acked))
	}
	if ok["refused"] {
		t.Error("the call refused while the disk was full is journaled as done")
	}
	if !exitAfterResume {
		t.Error("the exit of good's process while the disk was full is not journaled after journal.resumed")
	}
	if len(resumed) != 1 || !strings.Contains(resumed[0].Error, "no space left on device") || resumed[0].Attempts < 2 {
		t.Errorf("journal.resumed records %+v, want one naming ENOSPC after 2 retries or more", resumed)
	}
	t.Logf("%d calls answered, then: %v; resumed %v after space returned; journal.resumed %+v",
		len(acked), errLine(callErr), resumedIn.Round(time.Millisecond), *resumed[0])
}
