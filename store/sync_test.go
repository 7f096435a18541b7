//go:build linux

package store_test

import (
	"errors"
	"os"
	"testing"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/store"
)

// unsynced returns how many of the file's pages in the page cache are
// dirty or under writeback: written, but not yet on the disk, so that a
// crash of the machine would lose them. It asks the kernel with
// cachestat(2), and skips the test on a kernel without it (before 6.5)
// or a file system without a disk behind it (tmpfs).
func unsynced(t *testing.T, path string) uint64 {
	t.Helper()
	var fs unix.Statfs_t
	if err := unix.Statfs(path, &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Type == unix.TMPFS_MAGIC {
		t.Skipf("%s is on tmpfs, whose pages stay dirty: there is no disk to sync to", path)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cs unix.Cachestat_t
	// Len 0: from Off to the end of the file.
	err = unix.Cachestat(uint(f.Fd()), &unix.CachestatRange{}, &cs, 0)
	if errors.Is(err, unix.ENOSYS) {
		t.Skip("cachestat(2) needs Linux 6.5 or later")
	}
	if err != nil {
		t.Fatalf("cachestat(%s): %v", path, err)
	}
	return cs.Dirty + cs.Writeback
}

// TestAppendIsDurable: without NoSync, an append is on the disk when
// Append returns, or when the Pending of a Submit is done, whether it was
// committed in the caller's goroutine or by the writer: the journal file
// has no page left that the kernel has not written back. With NoSync the
// same appends leave dirty pages, which shows the probe can tell.
func TestAppendIsDurable(t *testing.T) {
	ctx := t.Context()
	appends := []struct {
		name string
		fn   func(j *store.Journal, sid uuid.UUID) error
	}{
		{"Append", func(j *store.Journal, sid uuid.UUID) error {
			_, err := j.Append(ctx, sid, store.Any, evs(3)) // a lone appender commits directly
			return err
		}},
		{"Submit", func(j *store.Journal, sid uuid.UUID) error {
			_, err := j.Submit(sid, store.Any, evs(3)).Wait(ctx) // the writer commits
			return err
		}},
		{"Append after Submit", func(j *store.Journal, sid uuid.UUID) error {
			p := j.Submit(sid, store.Any, evs(1))
			// Queued behind the Submit: the writer commits both.
			if _, err := j.Append(ctx, sid, store.Any, evs(2)); err != nil {
				return err
			}
			_, err := p.Wait(ctx)
			return err
		}},
	}
	for _, noSync := range []bool{false, true} {
		path := tempPath(t)
		j := mustOpen(t, path, &store.Options{NoSync: noSync})
		sid := events.NewID()
		for _, a := range appends {
			// With NoSync the kernel may write pages back on its own
			// (every 5 s, or under memory pressure): one of a few tries
			// must find them dirty.
			var n uint64
			for range 3 {
				if err := a.fn(j, sid); err != nil {
					t.Fatalf("%s: %v", a.name, err)
				}
				if n = unsynced(t, path); n != 0 || !noSync {
					break
				}
			}
			switch {
			case !noSync && n != 0:
				t.Errorf("%s returned with %d pages of the journal not on the disk", a.name, n)
			case noSync && n == 0:
				t.Errorf("%s with NoSync: no dirty page after 3 tries; the probe cannot tell a synced file from one that is not", a.name)
			}
		}
	}
}
