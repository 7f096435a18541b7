package store_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpledger/mcpledger/store"
)

// TestLockHolderNamesTheWriter: while a child process holds the journal,
// LockHolder finds it (pid and command line) through the journal and its
// intent lock, Writing says a writer is there, and a writer's Open fails
// naming it; once it lets go, nobody is named and Writing is false.
func TestLockHolderNamesTheWriter(t *testing.T) {
	path := tempPath(t)
	mustOpen(t, path, noSync()).Close()
	if store.Writing(path) {
		t.Error("Writing with no writer")
	}
	release, pid := holdInChildPID(t, path)
	for _, f := range []string{path, store.IntentPath(path)} {
		h, ok := store.LockHolder(f)
		if !ok || h.PID != pid || !strings.Contains(h.Command, "-test.run=^$") {
			t.Errorf("LockHolder(%s) = %+v, %v; want the child %d", filepath.Base(f), h, ok, pid)
		}
	}
	if !store.Writing(path) {
		t.Error("Writing is false while a child writes")
	}
	_, err := store.Open(path, &store.Options{LockTimeout: 10 * time.Millisecond})
	if !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), "process "+itoa(pid)+" (") {
		t.Errorf("Open beside the child: %v, want ErrLocked naming process %d", err, pid)
	}
	release()
	if h, ok := store.LockHolder(path); ok {
		t.Errorf("LockHolder after the child let go: %+v", h)
	}
	if store.Writing(path) {
		t.Error("Writing after the writer closed")
	}
}

// TestLockHolderOnlyOthers: a lock this process holds, a file nobody
// locks and a missing file name nobody.
func TestLockHolderOnlyOthers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if h, ok := store.LockHolder(path); ok {
		t.Errorf("LockHolder of an unlocked file: %+v", h)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if h, ok := store.LockHolder(path); ok {
		t.Errorf("LockHolder of a file this process locks: %+v", h)
	}
	if h, ok := store.LockHolder(path + ".missing"); ok {
		t.Errorf("LockHolder of a missing file: %+v", h)
	}
	if s := (store.Holder{PID: 7}).String(); s != "process 7" {
		t.Errorf("Holder without a command: %q", s)
	}
	if s := (store.Holder{PID: 7, Command: "mcpledger run"}).String(); s != "process 7 (mcpledger run)" {
		t.Errorf("Holder with a command: %q", s)
	}
}

// TestReaderWithoutIntentFile: a journal whose intent lock file is gone
// (made by an older build, or removed) is read from the file, and Writing
// says no writer is there.
func TestReaderWithoutIntentFile(t *testing.T) {
	path := tempPath(t)
	j := mustOpen(t, path, noSync())
	fill(t, j)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(store.IntentPath(path)); err != nil {
		t.Fatal(err)
	}
	if store.Writing(path) {
		t.Error("Writing without an intent file")
	}
	r, err := store.OpenReader(t.Context(), path, &store.ReaderOptions{Wait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if list, err := r.Sessions(t.Context()); err != nil || len(list) != 3 {
		t.Fatalf("Sessions: %d, %v", len(list), err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
