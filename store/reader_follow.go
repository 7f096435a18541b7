package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
)

// Follow is [Journal.Follow] for a journal another process writes: it
// delivers what is stored from fromGPos on, then each event as it is
// committed, across the writer's start, stop and restart, until ctx ends
// (it then returns ctx's error). While a writer serves reads, the writer
// pushes each commit; while none holds the file, Follow looks for a new
// commit every 20ms (one read of the file's meta pages).
// Closing the Reader ends it with [ErrClosed].
func (r *Reader) Follow(ctx context.Context, fromGPos uint64, fn func(events.Event) error) error {
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(r.life, cancel)
	defer stop()
	err := r.follow(fctx, fromGPos, fn)
	if r.life.Err() != nil && ctx.Err() == nil {
		return ErrClosed
	}
	return err
}

func (r *Reader) follow(ctx context.Context, fromGPos uint64, fn func(events.Event) error) error {
	next := max(fromGPos, r.base+1)
	for {
		mark := fileMark(r.path)
		var err error
		next, err = r.followWriter(ctx, next, fn)
		switch {
		case errors.Is(err, errWriter): // no writer serves reads: read the file
		case errors.Is(err, errGone):
			continue // the writer stopped: what it committed last is in the file
		default:
			return r.attribute(ctx, err)
		}
		src := r.source(ctx, readRequest{Op: opLog}, func(j *Journal) fillFunc { return j.fillLog })
		next, err = scan(ctx, next, src.fill, fn)
		src.close()
		switch {
		case errors.Is(err, ErrLocked):
			// A writer that serves no reads (an archive, an older
			// mcpledger) has held the file for Wait: a follower waits on.
			continue
		case errors.Is(err, ErrReplaced):
			// An archive replaced the file (run --retain, archive):
			// positions stay, the records up to its base moved out.
			if err := r.adopt(ctx); err != nil {
				return err
			}
			if next <= r.base {
				return fmt.Errorf("%w: events %d to %d moved to an archive before they were followed (mcpledger log --kind journal.archived names it: read them there with --journal ARCHIVE, and follow on here with --from %d)", ErrReplaced, next, r.base, r.base+1)
			}
			continue
		case err != nil:
			return r.attribute(ctx, err)
		}
		// Wait for a commit (the file's meta changes) or a writer.
		for fileMark(r.path) == mark && !r.writerWants() {
			if err := sleepCtx(ctx, followPoll); err != nil {
				return err
			}
		}
	}
}

// adopt makes the file now at the path the one read, after an archive
// replaced the one read so far.
func (r *Reader) adopt(ctx context.Context) error {
	r.mu.Lock()
	r.release()
	r.ino = 0
	r.mu.Unlock()
	var info readerInfo
	err := r.do(ctx, func(j *Journal) error {
		info = readerInfo{Base: j.Base(), Sealed: j.Sealed()}
		return nil
	}, readRequest{Op: opInfo}, &info)
	if err == nil {
		r.base, r.sealed = info.Base, info.Sealed
	}
	return err
}

// followWriter follows the log through the writer, from next, for as long
// as it serves: errWriter when none does, errGone when it stops.
func (r *Reader) followWriter(ctx context.Context, next uint64, fn func(events.Event) error) (uint64, error) {
	if !r.writerWants() {
		return next, errWriter
	}
	fr, closer, err := r.open(ctx, readRequest{Op: opFollow, From: next})
	if err != nil {
		return next, err
	}
	defer closer.Close()
	c := getChunk()
	defer putChunk(c)
	dec := decoders.Get().(*events.Decoder)
	defer decoders.Put(dec)
	for {
		c.reset()
		ferr := readRecords(fr, c, &next, readChunk)
		c.seal()
		c.fillErr = ferr
		if errors.Is(ferr, errGone) || errors.Is(ferr, errMore) {
			c.fillErr = nil
		}
		c.decode(dec)
		if err := c.deliver(fn, &next); err != nil {
			return next, err
		}
		if ctx.Err() != nil {
			return next, ctx.Err()
		}
		if ferr != nil && !errors.Is(ferr, errMore) {
			return next, ferr
		}
	}
}

// errMore says that a chunk filled up before the answer's end.
var errMore = errors.New("store: chunk full")

// readRecords reads record frames into c (copies) until an 'E' frame
// (nil), limit records in c (errMore), an error frame (its error), or a
// broken answer (errGone). *next follows the records read.
func readRecords(fr *frameReader, c *chunk, next *uint64, limit int) error {
	for len(c.pos) < limit {
		if err := fr.read(); errors.Is(err, ErrNoReads) {
			return err
		} else if err != nil {
			return errGone
		}
		switch fr.kind {
		case 'R':
			c.copyRec(fr.pos, fr.rec)
			if fr.pos.sid != uuid.Nil {
				*next = fr.pos.seq + 1
			} else {
				*next = fr.pos.gpos + 1
			}
		case 'E':
			*next = fr.next
			return nil
		case 'X':
			var we wireError
			if err := json.Unmarshal(fr.body, &we); err != nil {
				return errGone
			}
			return (&we).err()
		default:
			return errGone
		}
	}
	return errMore
}

// inode returns path's inode number, 0 if it cannot be read.
func inode(path string) uint64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	return inodeOf(f)
}

// inodeOf returns f's inode number, 0 if it cannot be read.
func inodeOf(f *os.File) uint64 {
	fi, err := f.Stat()
	if err != nil {
		return 0
	}
	return fi.Sys().(*syscall.Stat_t).Ino // store runs on Unix (flock)
}

// mark identifies a state of the journal file: which file, and the
// transaction IDs of its two meta pages (a commit writes one of them).
type mark struct {
	ino        uint64
	txid0, tx1 uint64
}

// fileMark reads the file's mark without a lock. A torn read of a meta
// page gives a mark that differs, and costs one needless read.
func fileMark(path string) mark {
	var m mark
	f, err := os.Open(path)
	if err != nil {
		return m // no file (yet): the zero mark
	}
	defer f.Close()
	m.ino = inodeOf(f)
	m0, _ := readMeta(f, 0)
	m1, _ := readMeta(f, int64(m0.pageSize))
	m.txid0, m.tx1 = m0.txid, m1.txid
	return m
}
