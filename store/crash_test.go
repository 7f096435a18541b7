package store_test

import (
	"flag"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/store"
)

var crashTrials = flag.Int("crash.trials", 30, "SIGKILL trials in TestCrash")

// TestCrash SIGKILLs a child process that appends in a loop, at a random
// moment, many times over the same file. After each kill the journal
// must open, verify, and hold every event the child acknowledged (printed
// after Append returned), with gapless seqs.
//
// It kills processes and takes seconds: it skips under -short (the
// mutation runs); TestAppendIsDurable checks the fsync it relies on.
func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("SIGKILLs child processes for seconds; skipped under -short")
	}
	path := tempPath(t)
	mustOpen(t, path, nil).Close()
	sids := []uuid.UUID{events.NewID(), events.NewID(), events.NewID()}
	var names []string
	for _, s := range sids {
		names = append(names, s.String())
	}
	acked := map[uuid.UUID]uint64{}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	total := 0
	for trial := range *crashTrials {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=append "+path, sessionsEnv+"="+strings.Join(names, ","))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := readLines(stdout)
		record := func(line string) {
			sid, seq, ok := strings.Cut(line, " ")
			n, err := strconv.ParseUint(seq, 10, 64)
			id, perr := uuid.Parse(sid)
			if !ok || err != nil || perr != nil {
				t.Fatalf("trial %d: child printed %q", trial, line)
			}
			acked[id] = max(acked[id], n)
			total++
		}
		// Kill at a random moment once the child is appending.
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("trial %d: child exited before appending: %v", trial, cmd.Wait())
			}
			record(line)
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("trial %d: child did not append within 30s", trial)
		}
		time.Sleep(time.Duration(5+rng.IntN(56)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		for line := range lines { // all the child acknowledged before it died
			record(line)
		}
		if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
			t.Fatalf("trial %d: child ended with %v, want killed", trial, err)
		}

		j, err := store.Open(path, nil)
		if err != nil {
			t.Fatalf("trial %d: Open after SIGKILL: %v", trial, err)
		}
		if _, err := j.Verify(t.Context()); err != nil {
			j.Close()
			t.Fatalf("trial %d: Verify after SIGKILL: %v", trial, err)
		}
		for _, sid := range sids {
			var n uint64
			err := j.ReadSession(t.Context(), sid, 1, func(e events.Event) error {
				n++
				if e.Seq != n {
					t.Fatalf("trial %d: session %s has seq %d at position %d", trial, sid, e.Seq, n)
				}
				return nil
			})
			if err != nil && acked[sid] > 0 {
				t.Fatalf("trial %d: ReadSession(%s): %v", trial, sid, err)
			}
			if n < acked[sid] {
				t.Fatalf("trial %d: session %s holds %d events, but %d were acknowledged", trial, sid, n, acked[sid])
			}
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d trials, %d acknowledged appends, all present", *crashTrials, total)
}
