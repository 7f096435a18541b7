package store

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/mcpledger/mcpledger/events"
)

// ReaderOptions configure [OpenReader]. A nil *ReaderOptions or a zero
// field gives the documented default.
type ReaderOptions struct {
	// Remote reaches the process that holds the journal for writing: it
	// sends request to it, to be answered by [ServeRead] on its journal,
	// and returns the answer. It fails when no process answers. Nil: the
	// reader waits for the file instead.
	Remote func(ctx context.Context, request []byte) (io.ReadCloser, error)

	// Wait bounds how long a read waits for the file when a writer holds
	// it and Remote does not answer (a writer between opening the journal
	// and serving reads, or one that serves none). Default
	// DefaultReaderWait.
	Wait time.Duration

	// Lease bounds how long the reader keeps the file open, and so
	// shared-locked, at a time: a writer that wants the file waits at most
	// this long plus one chunk's read. Default DefaultLease.
	Lease time.Duration
}

// Defaults for zero ReaderOptions fields.
const (
	DefaultReaderWait = 10 * time.Second
	DefaultLease      = 20 * time.Millisecond
)

// followPoll is how often Follow looks for a new commit in the file while
// no writer serves it; retryPause, how long a read waits before it tries
// the file and the writer again.
const (
	followPoll = 20 * time.Millisecond
	retryPause = 5 * time.Millisecond
)

// ErrReplaced is returned by a [Reader] whose journal file was replaced
// while it read (by an archive): positions it had read up to mean
// something else in the new file.
var ErrReplaced = errors.New("store: the journal file was replaced while it was being read (archived?): run the command again")

// Reader reads a journal without ever holding it for long, so that it
// never keeps a writer from starting or appending. While no writer holds
// the file, it reads the file itself under short leases (a read-only
// open, closed after Lease). While a writer holds it (or is about to:
// the intent lock, intent.go), it reads through that writer
// ([ReaderOptions.Remote], answered by [ServeRead]). Either way it gets
// the stored records and decodes and checks them with the same code as
// [Journal]'s reads, so its answers are the file's. A read moves between
// the two at a chunk boundary, by position: a writer's start or stop in
// the middle of a read (or a Follow) neither repeats nor skips an event.
//
// Its read methods are [Journal]'s, with the same meaning and errors.
type Reader struct {
	path string
	o    ReaderOptions

	// mu guards the lease: j is the file, open read-only, until expire
	// closes it. A read of the file holds mu for its transaction.
	mu     sync.Mutex
	j      *Journal
	expiry *time.Timer
	intent *os.File // the intent lock file, once it exists
	closed bool
	// life ends when the Reader is closed: it ends a Follow.
	life    context.Context
	endLife context.CancelFunc

	ino    uint64 // the file's inode when first leased (0: not yet)
	base   uint64
	sealed string
}

// errWriter says that a writer holds the file (or is taking it): read
// through it.
var errWriter = errors.New("store: a writer holds the journal")

// errGone says that the writer's answer broke off (it stopped): go on
// from the file, or from the next writer.
var errGone = errors.New("store: the writer stopped answering")

// OpenReader returns a Reader of the journal at path. It fails as a
// read-only [Open] does (a missing file wraps fs.ErrNotExist;
// [ErrNotJournal], [ErrNewerFormat], a [*CorruptError]), and with
// [ErrLocked] naming the holder when a writer holds the file for longer
// than Wait without answering through Remote.
func OpenReader(ctx context.Context, path string, opts *ReaderOptions) (*Reader, error) {
	r := &Reader{path: path}
	r.life, r.endLife = context.WithCancel(context.Background())
	if opts != nil {
		r.o = *opts
	}
	if r.o.Wait <= 0 {
		r.o.Wait = DefaultReaderWait
	}
	if r.o.Lease <= 0 {
		r.o.Lease = DefaultLease
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	var info readerInfo
	err := r.do(ctx, func(j *Journal) error {
		info = readerInfo{Base: j.Base(), Sealed: j.Sealed()}
		return nil
	}, readRequest{Op: opInfo}, &info)
	if err != nil {
		_ = r.Close()
		return nil, err
	}
	r.base, r.sealed = info.Base, info.Sealed
	return r, nil
}

// Path returns the journal's file.
func (r *Reader) Path() string { return r.path }

// Base is [Journal.Base] of the file when the Reader was opened.
func (r *Reader) Base() uint64 { return r.base }

// Sealed is [Journal.Sealed] of the file when the Reader was opened.
func (r *Reader) Sealed() string { return r.sealed }

// Close ends the lease, if any. Reads in progress fail with [ErrClosed].
func (r *Reader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	r.endLife()
	r.release()
	_ = r.intent.Close() // nil-safe
	r.intent = nil
	return nil
}

// release closes the leased file. Callers hold mu.
func (r *Reader) release() {
	if r.expiry != nil {
		r.expiry.Stop()
		r.expiry = nil
	}
	if r.j != nil {
		_ = r.j.Close()
		r.j = nil
	}
}

// expire ends the lease when its time is up (a read in progress finishes
// first: it holds mu).
func (r *Reader) expire() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.release()
}

// onFile runs fn on the leased file, taking a lease if none is held, or
// returns errWriter when a writer holds or wants the file.
func (r *Reader) onFile(fn func(j *Journal) error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	if r.j == nil {
		if intentHeld(r.path, &r.intent) {
			return errWriter
		}
		// One try at the lock: a writer without an intent lock (an older
		// build) holds it, or one is taking it.
		j, err := Open(r.path, &Options{ReadOnly: true, LockTimeout: time.Nanosecond})
		if errors.Is(err, ErrLocked) {
			return errWriter
		}
		if err != nil {
			return err
		}
		ino := inode(r.path)
		if r.ino == 0 {
			r.ino = ino
		} else if ino != r.ino || j.Base() != r.base {
			_ = j.Close()
			return ErrReplaced
		}
		r.j = j
		r.expiry = time.AfterFunc(r.o.Lease, r.expire)
	}
	return fn(r.j)
}

// onFileWatched is onFile for a read that may take long (Verify): while
// it runs, a watcher looks at the intent lock every millisecond and, when
// a writer wants the file, cancels the read, which then returns
// errWriter (to be done again through the writer).
func (r *Reader) onFileWatched(ctx context.Context, fn func(ctx context.Context, j *Journal) error) error {
	return r.onFile(func(j *Journal) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var wanted bool
		var wg sync.WaitGroup
		defer wg.Wait() // after cancel: the watcher ends
		wg.Go(func() {
			var f *os.File
			defer func() { _ = f.Close() }() // nil-safe
			t := time.NewTicker(lockPoll)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					if intentHeld(r.path, &f) {
						wanted = true
						cancel()
						return
					}
				}
			}
		})
		err := fn(ctx, j)
		cancel()
		wg.Wait()
		if wanted {
			r.release()
			return errWriter
		}
		return err
	})
}

// do runs a one-answer read: file on the file, or req through the writer,
// decoding its answer into out. It waits up to Wait for either.
func (r *Reader) do(ctx context.Context, file func(j *Journal) error, req readRequest, out any) error {
	return r.retry(ctx, func() error {
		err := r.onFile(file)
		if !errors.Is(err, errWriter) {
			return err
		}
		return r.ask(ctx, req, out)
	})
}

// retry runs attempt until it returns something else than errWriter or
// errGone, or until Wait has passed since a writer was first found
// holding the file without answering.
func (r *Reader) retry(ctx context.Context, attempt func() error) error {
	var since time.Time
	for {
		err := attempt()
		if !errors.Is(err, errWriter) && !errors.Is(err, errGone) {
			return err
		}
		pause := retryPause
		if errors.Is(err, errGone) {
			since, pause = time.Time{}, lockPoll // a writer answered a moment ago: it stopped
		} else if since.IsZero() {
			since = time.Now()
		} else if time.Since(since) > r.o.Wait {
			return r.lockedError()
		}
		if err := sleepCtx(ctx, pause); err != nil {
			return err
		}
	}
}

// lockedError is the error of a read that waited for Wait in vain.
func (r *Reader) lockedError() error {
	for _, f := range []string{IntentPath(r.path), r.path} {
		if h, ok := LockHolder(f); ok {
			return fmt.Errorf("read %s: %w: %s holds it and does not answer reads (an archive, or an older mcpledger): wait for it to end, or stop it", r.path, ErrLocked, h)
		}
	}
	return fmt.Errorf("read %s: %w by a process that does not answer reads: wait for it to end, or stop it", r.path, ErrLocked)
}

// sleepCtx waits for d (not at all if d <= 0), or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ask sends req to the writer and decodes its one-value answer into out.
// It returns errWriter when no writer answers (to wait and try again), and
// errGone when the answer broke off.
func (r *Reader) ask(ctx context.Context, req readRequest, out any) error {
	fr, closer, err := r.open(ctx, req)
	if err != nil {
		return err
	}
	defer closer.Close()
	err = fr.decodeAnswer(out)
	var ae *answerError
	if errors.As(err, &ae) {
		return ae.Err
	}
	if err != nil && !errors.Is(err, ErrNoReads) {
		return errGone
	}
	return err
}

// open sends req to the writer and returns a reader of its answer. The
// answer is closed when ctx ends, which ends a read blocked on it (a
// Ctrl-C, a deadline); Close stops that.
func (r *Reader) open(ctx context.Context, req readRequest) (*frameReader, io.Closer, error) {
	if r.o.Remote == nil {
		return nil, nil, errWriter
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, nil, err
	}
	rc, err := r.o.Remote(ctx, b)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, nil, errWriter
	}
	stop := context.AfterFunc(ctx, func() { _ = rc.Close() })
	return &frameReader{r: bufio.NewReaderSize(rc, 64<<10)}, answer{rc, stop}, nil
}

// answer is a writer's answer, closed by Close or when its ctx ends.
type answer struct {
	io.ReadCloser
	stop func() bool
}

func (a answer) Close() error {
	a.stop()
	return a.ReadCloser.Close()
}

// Sessions is [Journal.Sessions].
func (r *Reader) Sessions(ctx context.Context) ([]SessionInfo, error) {
	var out []SessionInfo
	err := r.do(ctx, func(j *Journal) (err error) {
		out, err = j.Sessions(ctx)
		return err
	}, readRequest{Op: opSessions}, &out)
	return out, err
}

// Head is [Journal.Head].
func (r *Reader) Head(ctx context.Context, session uuid.UUID) (SessionInfo, error) {
	var out SessionInfo
	err := r.do(ctx, func(j *Journal) (err error) {
		out, err = j.Head(ctx, session)
		return err
	}, readRequest{Op: opHead, Session: session}, &out)
	return out, err
}

// Checkpoints is [Journal.Checkpoints].
func (r *Reader) Checkpoints(ctx context.Context) ([]Checkpoint, error) {
	var out []Checkpoint
	var wire []wireCheckpoint
	err := r.do(ctx, func(j *Journal) (err error) {
		out, err = j.Checkpoints(ctx)
		wire = nil
		return err
	}, readRequest{Op: opCheckpoints}, &wire)
	if wire != nil {
		out = make([]Checkpoint, len(wire))
		for i, w := range wire {
			out[i] = Checkpoint{GPos: w.GPos, Data: w.Data, Err: w.Err.err(), Base: w.Base}
		}
	}
	return out, err
}

// Cursor is [Journal.Cursor].
func (r *Reader) Cursor(ctx context.Context, name string) (Cursor, error) {
	var out Cursor
	err := r.do(ctx, func(j *Journal) (err error) {
		out, err = j.Cursor(ctx, name)
		return err
	}, readRequest{Op: opCursor, Name: name}, &out)
	return out, err
}

// Verify is [Journal.Verify] of everything committed when it runs. On the
// file, it stops when a writer wants the file and is done again through
// the writer, so that a long verify never delays a writer's start.
func (r *Reader) Verify(ctx context.Context) (VerifyReport, error) {
	var rep VerifyReport
	var verr error
	err := r.retry(ctx, func() error {
		err := r.onFileWatched(ctx, func(ctx context.Context, j *Journal) error {
			rep, verr = j.Verify(ctx)
			return nil
		})
		if !errors.Is(err, errWriter) {
			return err
		}
		var w wireVerify
		if err := r.ask(ctx, readRequest{Op: opVerify}, &w); err != nil {
			return err
		}
		rep, verr = w.Report, w.Err.err()
		return nil
	})
	if err != nil {
		return rep, err
	}
	return rep, verr
}

// ReadSession is [Journal.ReadSession].
func (r *Reader) ReadSession(ctx context.Context, session uuid.UUID, fromSeq uint64, fn func(events.Event) error) error {
	src := r.source(ctx, readRequest{Op: opSession, Session: session}, func(j *Journal) fillFunc { return j.fillSession(session) })
	defer src.close()
	_, err := scan(ctx, max(fromSeq, 1), src.fill, fn)
	return err
}

// ReadAll is [Journal.ReadAll].
func (r *Reader) ReadAll(ctx context.Context, fromGPos uint64, fn func(events.Event) error) error {
	src := r.source(ctx, readRequest{Op: opLog}, func(j *Journal) fillFunc { return j.fillLog })
	defer src.close()
	_, err := scan(ctx, max(fromGPos, r.base+1), src.fill, fn)
	return r.attribute(ctx, err)
}

// attribute is [Journal.attribute], on the file or through the writer:
// a record found damaged by its CRC or decoding (here, not by the writer,
// which attributes what it finds) is named by its session and seq.
func (r *Reader) attribute(ctx context.Context, err error) error {
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Session != uuid.Nil || ce.GPos == 0 {
		return err
	}
	var loc wireLocation
	_ = r.do(ctx, func(j *Journal) error {
		_ = j.read(func(tx *bolt.Tx) error { // a damaged index may fault too
			loc.Session, loc.Seq, _ = locate(tx, ce.GPos)
			return nil
		})
		return nil
	}, readRequest{Op: opLocate, From: ce.GPos}, &loc)
	ce.Session, ce.Seq = loc.Session, loc.Seq
	return err
}

// writerWants reports whether a writer holds the intent lock.
func (r *Reader) writerWants() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.closed && intentHeld(r.path, &r.intent)
}
