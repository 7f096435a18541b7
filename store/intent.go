package store

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A writer and the readers of a journal file meet at two locks:
//
//   - bbolt's flock on the journal itself: exclusive for the writer for as
//     long as it has the file open, shared for a reader's open;
//   - the intent lock, a flock on the file beside it ([IntentPath]): a
//     writer takes it exclusively before it opens the journal and keeps it
//     until Close; a [Reader] checks it before each lease of the file and
//     takes no new lease while it is held.
//
// Without the intent lock a writer could wait for ever on readers that
// keep taking short leases one after the other (flock grants a shared
// lock while an exclusive one waits). With it, a writer waits at most for
// the leases already granted to end, and a reader learns that a writer
// is there (or about to be) with one non-blocking flock, and reads
// through it instead (see [ReaderOptions.Remote]).

// IntentPath is the intent lock file of the journal at path.
func IntentPath(path string) string { return path + ".lock" }

// lockPoll is how often a waiting writer retries the intent lock and the
// journal's own lock: readers hold a lease for milliseconds.
const lockPoll = time.Millisecond

// takeIntent takes the intent lock of the journal at path exclusively,
// waiting up to timeout, and returns its file (Close releases it).
func takeIntent(path string, timeout time.Duration) (*os.File, error) {
	f, err := os.OpenFile(IntentPath(path), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: intent lock: %w", path, err)
	}
	if err := pollLock(f, syscall.LOCK_EX, timeout); err != nil {
		_ = f.Close()
		return nil, lockedError(path, IntentPath(path), err)
	}
	return f, nil
}

// awaitReaders waits, up to timeout, until no process holds the journal
// file at path shared (readers finishing their lease), so that bbolt's
// own lock, which retries only every 50ms, is taken at once.
func awaitReaders(path string, timeout time.Duration) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if err := pollLock(f, syscall.LOCK_EX, timeout); err != nil {
		return lockedError(path, path, err)
	}
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}

// pollLock takes flock how on f, retrying every lockPoll until timeout; it
// returns ErrLocked when the time is up.
func pollLock(f *os.File, how int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return err
		}
		if time.Now().After(deadline) {
			return ErrLocked
		}
		time.Sleep(lockPoll)
	}
}

// intentHeld reports whether a writer holds (or is taking) the intent
// lock of the journal at path. f is the reader's open intent file, or nil
// when it did not exist yet (it is then opened if it does now).
func intentHeld(path string, f **os.File) bool {
	if *f == nil {
		g, err := os.Open(IntentPath(path))
		if err != nil {
			return false // no intent file: no writer has opened this journal since it was made
		}
		*f = g
	}
	fd := int((*f).Fd())
	if err := syscall.Flock(fd, syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return true
	}
	_ = syscall.Flock(fd, syscall.LOCK_UN)
	return false
}

// Writing reports whether a writer holds (or is taking) the journal at
// path.
func Writing(path string) bool {
	var f *os.File
	held := intentHeld(path, &f)
	_ = f.Close() // nil-safe
	return held
}

// lockedError is ErrLocked for the journal at path, naming the process
// that holds lockFile when /proc/locks says.
func lockedError(path, lockFile string, err error) error {
	if !errors.Is(err, ErrLocked) {
		return fmt.Errorf("open %s: lock: %w", path, err)
	}
	if h, ok := LockHolder(lockFile); ok {
		return fmt.Errorf("open %s: %w: %s holds it", path, ErrLocked, h)
	}
	return fmt.Errorf("open %s: %w", path, ErrLocked)
}

// Holder is a process holding a file lock.
type Holder struct {
	PID     int
	Command string // its command line, arguments separated by spaces
}

func (h Holder) String() string {
	if h.Command == "" {
		return fmt.Sprintf("process %d", h.PID)
	}
	return fmt.Sprintf("process %d (%s)", h.PID, h.Command)
}

// LockHolder returns a process other than this one that holds a flock on
// path, from /proc/locks (Linux). ok is false when none is found or the
// system does not say.
func LockHolder(path string) (h Holder, ok bool) {
	n := inode(path)
	if n == 0 {
		return h, false
	}
	ino := strconv.FormatUint(n, 10)
	f, err := os.Open("/proc/locks")
	if err != nil {
		return h, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// 1: FLOCK  ADVISORY  WRITE 4242 fd:01:123456 0 EOF (a waiter's
		// line has "->" before FLOCK, and one more field)
		fields := strings.Fields(sc.Text())
		if len(fields) < 8 || fields[1] != "FLOCK" {
			continue
		}
		id := strings.Split(fields[5], ":")
		pid, err := strconv.Atoi(fields[4])
		if err != nil || len(id) != 3 || id[2] != ino || pid == os.Getpid() {
			continue
		}
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		return Holder{PID: pid, Command: strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))}, true
	}
	return h, false
}
