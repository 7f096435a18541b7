package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Options configure [Open]. A nil *Options or a zero field gives the
// documented default.
type Options struct {
	// Logger receives the journal's few log lines (open, close, failed
	// commits). Nil means silent.
	Logger *slog.Logger

	// ReadOnly opens the file with a shared lock for reading: many readers
	// may share it, but no writer can open it meanwhile (and a reader
	// cannot open it while a writer holds it). Appends fail with
	// [ErrReadOnly]. The file must exist.
	ReadOnly bool

	// LockTimeout bounds the wait for the file lock; when it passes, Open
	// fails with [ErrLocked]. Default 1s.
	LockTimeout time.Duration

	// MaxSize caps the file size in bytes; a commit that would grow the
	// file past it fails with [ErrFull]. 0 means no cap.
	MaxSize int

	// NoSync skips fsync on commit. THIS IS UNSAFE: a crash can lose or
	// corrupt acknowledged events. Only for tests and CPU benchmarks.
	NoSync bool

	// MaxBatch caps the number of events the writer puts in one commit.
	// A single append larger than MaxBatch still commits whole. Default 1024.
	MaxBatch int

	// Linger bounds how long the writer waits for appends to gather
	// before a commit, which it does only when the last commit carried
	// several appends (concurrent appenders) and fewer are queued: they
	// then share one commit instead of splitting into two. A lone
	// appender never waits. Default DefaultLinger; negative disables.
	Linger time.Duration
}

// Defaults for zero Options fields.
const (
	DefaultLockTimeout = time.Second
	DefaultMaxBatch    = 1024
	// DefaultLinger is Options.Linger's default: with 64 concurrent
	// appenders on the dev VM, commits carry 59 appends instead of 37.
	DefaultLinger = 500 * time.Microsecond
)

// initialMmapSize is mapped up front so that read transactions rarely
// block the writer on a remap (journal-notes §3.2).
const initialMmapSize = 1 << 30

// Journal is the durable event journal: one bbolt file holding every
// session's events in one global log, and per session a head (summary
// and hash chain) and an index into the log. Open one with [Open].
type Journal struct {
	db       *bolt.DB
	path     string
	intent   *os.File // the intent lock (intent.go); nil when read-only
	log      *slog.Logger
	readOnly bool
	maxBatch int
	linger   time.Duration

	// reqs carries appends to the writer goroutine, which owns every write
	// transaction. quit is closed by Close; writerDone by the writer on exit.
	reqs       chan *request
	quit       chan struct{}
	writerDone chan struct{}

	// mu guards closed. Senders hold it shared while they enqueue, so once
	// Close has set closed under the exclusive lock no request can enter
	// reqs any more.
	mu        sync.RWMutex
	closed    bool
	closeOnce sync.Once
	closeErr  error

	// commits is closed and replaced after every commit that stored
	// events, waking followers.
	commitMu sync.Mutex
	commits  chan struct{}

	// commitN counts committed write transactions (for benchmarks).
	commitN atomic.Uint64

	// pendingCP is the checkpoint SaveCheckpoint handed over, until a
	// commit (or Close) writes it.
	pendingCP atomic.Pointer[Checkpoint]

	// base and sealed are meta/base and meta/sealed, read at Open (they
	// never change while a file is open: Archive writes new files).
	base   uint64
	sealed string

	// txMu is held by whoever runs a write transaction: the writer
	// goroutine, or an appender committing its own append (direct). It
	// guards everything below.
	txMu    sync.Mutex
	st      *stager
	w       *txWriter
	ids     *recentIDs // IDs of the last RetryWindow events, for retries
	results []staged
	errs    []error
	one     [1]*request

	// queued counts appends handed to the writer and not yet committed;
	// solo is set while commits carry one append each. Together they
	// decide when an appender may commit directly.
	queued atomic.Int64
	solo   atomic.Bool
}

// Open opens the journal at path, creating the file (mode 0600) and its
// directory (0700) if needed, and starts its writer. On a new file it
// writes meta/format and meta/codec. Errors: [ErrLocked] (wrapped with the
// path) when another process holds the file, [ErrNotJournal],
// [ErrNewerFormat], [ErrCorrupt] for a truncated file or a damaged page
// among those Open reads (the freelist, meta/, the end of log/), and for
// a ReadOnly open of a missing file an error wrapping fs.ErrNotExist. A
// failed Open leaves the file closed and unlocked.
func Open(path string, opts *Options) (j *Journal, err error) {
	// Open reads pages (the freelist, meta/, the end of log/): bbolt
	// asserts on a damaged one by panicking, and one that points past the
	// end of the file faults (see fault.go). Report the file as corrupt
	// instead of crashing the process; whatever was opened is closed by
	// then (open, boltOpen).
	defer func() {
		if r := recover(); r != nil {
			j, err = nil, fmt.Errorf("open %s: %w (run mcpledger verify on a copy, or move it aside)", path, corruptFromPanic(r))
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	return open(path, opts)
}

func open(path string, opts *Options) (*Journal, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.LockTimeout <= 0 {
		o.LockTimeout = DefaultLockTimeout
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.Linger == 0 {
		o.Linger = DefaultLinger
	}
	if o.ReadOnly {
		info, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("open journal: %w", err)
		}
		if info.Size() == 0 {
			return nil, fmt.Errorf("open %s: %w: empty file", path, ErrNotJournal)
		}
	} else if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create journal directory: %w", err)
	}
	var intent *os.File // a writer's intent lock (intent.go), held until Close
	if !o.ReadOnly {
		var err error
		if intent, err = takeIntent(path, o.LockTimeout); err != nil {
			return nil, err
		}
		defer func() {
			if intent != nil { // not handed to the Journal: Open failed
				_ = intent.Close()
			}
		}()
		if err := awaitReaders(path, o.LockTimeout); err != nil {
			return nil, err
		}
	}
	// Before bbolt maps a truncated file, or reads a damaged freelist.
	if err := checkFileFor(path, o.LockTimeout, !o.ReadOnly); err != nil {
		if errors.Is(err, ErrLocked) {
			return nil, lockedError(path, path, ErrLocked)
		}
		return nil, err
	}
	db, err := boltOpen(path, &bolt.Options{
		Timeout:         o.LockTimeout,
		ReadOnly:        o.ReadOnly,
		FreelistType:    bolt.FreelistMapType,
		NoFreelistSync:  false,
		NoSync:          o.NoSync,
		MaxSize:         o.MaxSize,
		InitialMmapSize: initialMmapSize,
	})
	if err != nil {
		if err = translate(err); errors.Is(err, ErrLocked) {
			return nil, lockedError(path, path, err)
		}
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	opened := false
	defer func() { // a panic below (a damaged page): release the file first
		if !opened {
			if r := recover(); r != nil {
				_ = db.Close()
				panic(r)
			}
		}
	}()
	if err := initMeta(db, o.ReadOnly); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	j := &Journal{
		db:         db,
		path:       path,
		log:        o.Logger.With(logKeyPath, path),
		readOnly:   o.ReadOnly,
		maxBatch:   o.MaxBatch,
		linger:     o.Linger,
		reqs:       make(chan *request, o.MaxBatch),
		quit:       make(chan struct{}),
		writerDone: make(chan struct{}),
		commits:    make(chan struct{}),
	}
	_ = db.View(func(tx *bolt.Tx) error { // checkMeta checked both
		j.base, j.sealed = baseOf(tx), string(tx.Bucket(bucketMeta).Get(keySealed))
		return nil
	})
	if j.sealed != "" && !o.ReadOnly {
		_ = db.Close()
		return nil, fmt.Errorf("open %s: %w: %s", path, ErrSealed, j.sealed)
	}
	if o.ReadOnly {
		close(j.writerDone)
	} else {
		j.ids = newRecentIDs(RetryWindow)
		j.st, j.w = newStager(), newTxWriter(j.ids)
		j.solo.Store(true)
		var skipped int
		var damaged uint64
		// View fails only on a closed database, and load cannot fail: it
		// reports what it could not read.
		_ = db.View(func(tx *bolt.Tx) error { skipped, damaged = j.ids.load(tx); return nil })
		if damaged != 0 {
			_ = db.Close()
			return nil, fmt.Errorf("open %s: %w (run mcpledger verify on a copy, or move it aside)", path, &CorruptError{GPos: damaged,
				Reason: "the end of the log is damaged (this entry is missing, out of order, or points outside the file), and appending would rewrite it"})
		}
		if skipped > 0 {
			j.log.Warn("records at the end of the journal fail their CRC; run verify", logKeyRecords, skipped)
		}
		go j.write() // owned by j: Close waits for writerDone
	}
	j.log.Info("journal opened", logKeyReadOnly, o.ReadOnly, logKeyNoSync, o.NoSync)
	j.intent, intent = intent, nil
	opened = true
	return j, nil
}

// boltOpen is bolt.Open, except that when bbolt panics while opening (on
// a damaged page that checkFile did not catch) it returns a *CorruptError
// and releases the file: bbolt cannot clean up after a panic, and its file
// would stay open and locked until the process exits, so that the next
// Open of it would fail with ErrLocked. The lock is released explicitly
// before the file is closed, because a memory map bbolt may have made by
// then keeps the open file, and so its flock, alive. The map itself stays
// (address space, no lock) until the process exits; checkFile's checks
// make this rare.
func boltOpen(path string, o *bolt.Options) (db *bolt.DB, err error) {
	var file *os.File
	o.OpenFile = func(name string, flag int, perm os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag, perm)
		file = f
		return f, err
	}
	defer func() {
		if r := recover(); r != nil {
			if file != nil {
				_ = syscall.Flock(int(file.Fd()), syscall.LOCK_UN)
				_ = file.Close()
			}
			db, err = nil, corruptFromPanic(r)
		}
	}()
	return bolt.Open(path, 0o600, o)
}

// Log keys.
const (
	logKeyPath     = "path"
	logKeyReadOnly = "read_only"
	logKeyNoSync   = "no_sync"
	logKeyEvents   = "events"
	logKeyRequests = "requests"
	logKeyRecords  = "records"
	logKeyError    = "err"
	logKeyGPos     = "gpos"
)

// initMeta checks the meta bucket and, on a new writable file, creates it
// and the other top-level buckets.
func initMeta(db *bolt.DB, readOnly bool) error {
	check := checkMeta
	if readOnly {
		return translate(db.View(check))
	}
	return translate(db.Update(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketMeta) == nil {
			empty := true
			_ = tx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return errStop })
			if !empty {
				return fmt.Errorf("%w: bbolt file without a meta bucket", ErrNotJournal)
			}
			meta, err := tx.CreateBucket(bucketMeta)
			if err != nil {
				return err
			}
			for _, kv := range [][2][]byte{
				{keyFormat, []byte(strconv.Itoa(FormatVersion))},
				{keyCodec, []byte(strconv.Itoa(CodecVersion))},
				{keyCreated, []byte(time.Now().UTC().Format(time.RFC3339Nano))},
			} {
				if err := meta.Put(kv[0], kv[1]); err != nil {
					return err
				}
			}
			for _, name := range [][]byte{bucketLog, bucketSessions, bucketIndex} {
				if _, err := tx.CreateBucket(name); err != nil {
					return err
				}
			}
		}
		return check(tx)
	}))
}

// parseVersion parses a decimal meta version; 0 is not a version.
func parseVersion(v []byte) (uint64, error) {
	if len(v) > 10 { // 2^32-1; and a damaged length copies nothing
		return 0, errors.New("too long")
	}
	n, err := strconv.ParseUint(string(v), 10, 32)
	if err == nil && n == 0 {
		err = errors.New("zero version")
	}
	return n, err
}

// errStop ends a ForEach early.
var errStop = errors.New("stop")

// Path returns the file the journal was opened from.
func (j *Journal) Path() string { return j.path }

// Close stops the writer and closes the file. Appends still queued fail
// with [ErrClosed]; a batch already being committed finishes first.
// Followers return [ErrClosed]. Close is idempotent and safe to call
// concurrently with any method.
func (j *Journal) Close() error {
	j.closeOnce.Do(func() {
		close(j.quit)
		j.mu.Lock()
		j.closed = true
		j.mu.Unlock()
		<-j.writerDone
		_ = j.flushCheckpoint() // logged; a lost checkpoint loses nothing
		for {
			select {
			case r := <-j.reqs:
				r.p.finish(AppendResult{}, ErrClosed)
				continue
			default:
			}
			break
		}
		j.closeErr = translate(j.db.Close())
		if j.intent != nil {
			_ = j.intent.Close() // after the file: a reader's next lease finds it free
		}
		j.log.Info("journal closed")
	})
	return j.closeErr
}

// isClosed reports whether Close has been called.
func (j *Journal) isClosed() bool {
	select {
	case <-j.quit:
		return true
	default:
		return false
	}
}

// view runs fn in a read transaction, translating errors, unless ctx has
// ended or the journal is closed.
func (j *Journal) view(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if j.isClosed() {
		return ErrClosed
	}
	return j.read(fn)
}

// read runs fn in a read transaction, translating errors. bbolt asserts
// on damaged pages by panicking, and a damaged page that points past the
// end of the file faults: a read of a damaged journal reports either as a
// *CorruptError instead of crashing the process (fault.go).
func (j *Journal) read(fn func(tx *bolt.Tx) error) error {
	return translate(j.db.View(func(tx *bolt.Tx) (err error) {
		defer recoverCorrupt(&err)
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		return fn(tx)
	}))
}

// update runs fn in a write transaction and commits it, translating
// errors; a panic or fault on a damaged page, in fn or in the commit,
// rolls the transaction back and is returned as a *CorruptError.
func (j *Journal) update(fn func(tx *bolt.Tx) error) (err error) {
	defer recoverCorrupt(&err)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	return translate(j.db.Update(fn))
}
