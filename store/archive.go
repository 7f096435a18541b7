package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/mcpledger/mcpledger/events"
)

// ArchiveOptions configure [Archive].
type ArchiveOptions struct {
	// Logger receives progress (nil: silent).
	Logger *slog.Logger
	// LockTimeout is how long to wait for the journal's lock (default
	// DefaultLockTimeout).
	LockTimeout time.Duration
	// Chunk is how many records each copy transaction carries (default
	// 65,536).
	Chunk int
	// Step, when set, is called after each durable step, with its name
	// (crash tests stop the process there).
	Step func(name string)
}

// ArchiveResult says what [Archive] did.
type ArchiveResult struct {
	// Archive is the archive journal's path.
	Archive string
	// From and Through are the first and last global positions moved.
	From, Through uint64
	// Sessions are the heads of the sessions moved, in key order.
	Sessions []SessionInfo
	// Digest is the SHA-256 of the moved records' bytes, in log order.
	Digest [32]byte
	// SizeBefore and SizeAfter are the live file's sizes in bytes.
	SizeBefore, SizeAfter int64
}

// Archive moves the records of the journal at path from its base+1
// through global position through, and the sessions they belong to
// (each must lie wholly inside that range), into a new sealed archive
// journal at archivePath, and rewrites the live journal without them:
//
//  1. The archive is written beside its final name, verified, and renamed
//     into place. It is an ordinary journal, read-only: its records keep
//     their bytes and positions, so their CRCs, the sessions' hash chains
//     and every read command work on it as on the live journal.
//  2. The live journal is written to a new file holding the records after
//     through, unchanged, with meta/base = through and base (the fold of
//     every record up to through, which the caller computed) as its base
//     state, and the checkpoints after through. The events finish returns,
//     given what was archived, are appended to it (the journal.archived
//     record). Then it is renamed over path: that rename is the commit.
//
// A crash before the second rename leaves the live journal as it was (and
// maybe an archive whose sessions are still live: an orphan, which the
// next Archive to the same path replaces); after it, the live journal
// without the archived records and naming the archive. No session is in
// neither file. Archive holds the journal's lock throughout: it fails with
// ErrLocked while another process has it open.
func Archive(ctx context.Context, path, archivePath string, through uint64, base []byte,
	finish func(ArchiveResult) (uuid.UUID, []events.Event), opts *ArchiveOptions) (ArchiveResult, error) {
	var o ArchiveOptions
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Chunk <= 0 {
		o.Chunk = 1 << 16
	}
	if o.Step == nil {
		o.Step = func(string) {}
	}
	res := ArchiveResult{Archive: archivePath, Through: through}
	j, err := Open(path, &Options{LockTimeout: o.LockTimeout, Logger: o.Logger})
	if err != nil {
		return res, err
	}
	defer j.Close()
	a := &archiver{j: j, o: o, res: &res}
	if err := a.plan(ctx, archivePath); err != nil {
		return res, err
	}
	if info, err := os.Stat(path); err == nil {
		res.SizeBefore = info.Size()
	}
	if err := a.writeArchive(ctx, archivePath); err != nil {
		return res, err
	}
	if err := a.writeLive(ctx, path, base, finish); err != nil {
		return res, err
	}
	if info, err := os.Stat(path); err == nil {
		res.SizeAfter = info.Size()
	}
	return res, nil
}

// archiver carries one Archive.
type archiver struct {
	j    *Journal
	o    ArchiveOptions
	res  *ArchiveResult
	last uint64             // the live log's last position
	gone map[uuid.UUID]bool // the archived sessions
}

// ErrArchiveExists is returned by Archive when archivePath holds an
// archive the live journal has committed (its records are no longer
// live), or a file that is not an archive.
var ErrArchiveExists = errors.New("store: the archive file exists")

// plan checks the range and finds the sessions to move. An archive left
// at archivePath by an Archive that did not commit (its records are all
// still live) is removed, as are temporary files of one.
func (a *archiver) plan(ctx context.Context, archivePath string) error {
	j, through := a.j, a.res.Through
	a.res.From = j.base + 1
	a.gone = map[uuid.UUID]bool{}
	err := j.view(ctx, func(tx *bolt.Tx) error {
		a.last = tx.Bucket(bucketLog).Sequence()
		if through <= j.base || through > a.last {
			return fmt.Errorf("%w: archive through gpos %d: the journal holds %d..%d", ErrInvalid, through, j.base+1, a.last)
		}
		return tx.Bucket(bucketSessions).ForEach(func(k, v []byte) error {
			sid := uuid.UUID(k)
			var h head
			if len(k) != 16 || !parseHead(sid, v, &h) {
				return &CorruptError{Session: sid, Reason: "undecodable head"}
			}
			if h.info.FirstGPos > through {
				return nil
			}
			if h.info.LastGPos > through {
				return fmt.Errorf("%w: session %s runs from gpos %d to %d, across the cut at %d", ErrInvalid, sid, h.info.FirstGPos, h.info.LastGPos, through)
			}
			a.gone[sid] = true
			a.res.Sessions = append(a.res.Sessions, h.info)
			return nil
		})
	})
	if err != nil {
		return err
	}
	for _, p := range []string{archivePath + ".tmp", j.path + ".compact.tmp"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if _, err := os.Stat(archivePath); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	// An orphan: an archive of records that are all still live here.
	old, err := Open(archivePath, &Options{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("%w: %s (%v); choose another directory or move it", ErrArchiveExists, archivePath, err)
	}
	orphan := old.Sealed() != "" && old.base == j.base
	if orphan {
		err = old.view(ctx, func(tx *bolt.Tx) error {
			orphan = tx.Bucket(bucketLog).Sequence() <= a.last
			return nil
		})
	}
	old.Close()
	if err != nil || !orphan {
		return fmt.Errorf("%w: %s holds records the journal no longer has; choose another directory or move it", ErrArchiveExists, archivePath)
	}
	a.o.Logger.Warn("replacing an archive that was never committed", "path", archivePath)
	return os.Remove(archivePath)
}

// writeArchive writes the archive journal and renames it into place.
func (a *archiver) writeArchive(ctx context.Context, archivePath string) error {
	j := a.j
	tmp := archivePath + ".tmp"
	if err := os.MkdirAll(filepath.Dir(archivePath), 0o700); err != nil {
		return err
	}
	sealed := fmt.Sprintf("archive of %s, records %d..%d, written %s", j.path, a.res.From, a.res.Through, time.Now().UTC().Format(time.RFC3339))
	err := a.copy(ctx, tmp, func(dst *bolt.Tx, src *bolt.Tx) error {
		meta := dst.Bucket(bucketMeta)
		if err := meta.Put(keySealed, []byte(sealed)); err != nil {
			return err
		}
		// The archive continues from the previous one (base 0: the first).
		if err := meta.Put(keyBase, strconv.AppendUint(nil, j.base, 10)); err != nil {
			return err
		}
		if st := src.Bucket(bucketMeta).Get(keyBaseState); st != nil {
			return meta.Put(keyBaseState, bytes.Clone(st))
		}
		return nil
	}, func(sid uuid.UUID) bool { return a.gone[sid] }, a.res.From, a.res.Through, true)
	if err != nil {
		return err
	}
	// Check what was written before it replaces anything.
	aj, err := Open(tmp, &Options{ReadOnly: true})
	if err != nil {
		return err
	}
	_, err = aj.Verify(ctx)
	aj.Close()
	if err != nil {
		return fmt.Errorf("the archive written does not verify: %w", err)
	}
	a.o.Step("archive-verified")
	if err := renameDurably(tmp, archivePath); err != nil {
		return err
	}
	a.o.Step("archive-renamed")
	return nil
}

// writeLive writes the live journal without the archived records, appends
// finish's events to it, and renames it over the journal.
func (a *archiver) writeLive(ctx context.Context, path string, base []byte, finish func(ArchiveResult) (uuid.UUID, []events.Event)) error {
	through := a.res.Through
	tmp := path + ".compact.tmp"
	err := a.copy(ctx, tmp, func(dst *bolt.Tx, src *bolt.Tx) error {
		meta := dst.Bucket(bucketMeta)
		if err := meta.Put(keyCreated, bytes.Clone(src.Bucket(bucketMeta).Get(keyCreated))); err != nil {
			return err
		}
		if err := meta.Put(keyBase, strconv.AppendUint(nil, through, 10)); err != nil {
			return err
		}
		if err := meta.Put(keyBaseState, sealValue(base)); err != nil {
			return err
		}
		if err := copyBucket(dst, src, bucketCursors); err != nil {
			return err
		}
		cps := src.Bucket(bucketCheckpoints)
		if cps == nil {
			return nil
		}
		out, err := dst.CreateBucket(bucketCheckpoints)
		if err != nil {
			return err
		}
		return cps.ForEach(func(k, v []byte) error {
			if gpos, ok := btoi(k); ok && gpos > through {
				return out.Put(bytes.Clone(k), bytes.Clone(v))
			}
			return nil
		})
	}, func(sid uuid.UUID) bool { return !a.gone[sid] }, through+1, a.last, false)
	if err != nil {
		return err
	}
	nj, err := Open(tmp, nil)
	if err != nil {
		return err
	}
	defer nj.Close()
	if finish != nil {
		sid, evs := finish(*a.res)
		if _, err := nj.Append(ctx, sid, NoStream, evs); err != nil {
			return fmt.Errorf("record the archive: %w", err)
		}
	}
	a.o.Step("live-written")
	// nj holds the new file's lock: no other process can open it between
	// the rename and the old file's close.
	if err := renameDurably(tmp, path); err != nil {
		return err
	}
	a.o.Step("live-renamed")
	return nil
}

// copy writes a new journal file at dst holding the live journal's
// records from..to (unchanged, under the same keys; a range that is
// empty when from > to), the heads and index segments of the sessions
// keep admits, and what meta adds. It commits in chunks, calling Step
// after each; digest sums the records into the result.
func (a *archiver) copy(ctx context.Context, dst string, meta func(dst, src *bolt.Tx) error, keep func(uuid.UUID) bool, from, to uint64, digest bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	db, err := bolt.Open(dst, 0o600, &bolt.Options{FreelistType: bolt.FreelistMapType, Timeout: time.Second})
	if err != nil {
		return translate(err)
	}
	defer db.Close()
	if err := initMeta(db, false); err != nil {
		return err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		return a.j.read(func(src *bolt.Tx) error {
			if err := meta(tx, src); err != nil {
				return err
			}
			sessions, index := tx.Bucket(bucketSessions), tx.Bucket(bucketIndex)
			sessions.FillPercent, index.FillPercent = fillSessions, fillIndex
			err := src.Bucket(bucketSessions).ForEach(func(k, v []byte) error {
				if keep(uuid.UUID(k)) {
					return sessions.Put(bytes.Clone(k), bytes.Clone(v))
				}
				return nil
			})
			if err != nil {
				return err
			}
			return src.Bucket(bucketIndex).ForEach(func(k, v []byte) error {
				if sid, _, ok := parseIndexKey(k); ok && keep(sid) {
					return index.Put(bytes.Clone(k), bytes.Clone(v))
				}
				return nil
			})
		})
	})
	if err != nil {
		return translate(err)
	}
	a.o.Step("heads")
	sum := sha256.New()
	for next := from; next <= to; {
		if err := ctx.Err(); err != nil {
			return err
		}
		stop := min(to, next+uint64(a.o.Chunk)-1)
		err := db.Update(func(tx *bolt.Tx) error {
			out := tx.Bucket(bucketLog)
			out.FillPercent = fillLog
			return a.j.read(func(src *bolt.Tx) error {
				c := src.Bucket(bucketLog).Cursor()
				var kb [8]byte
				k, v := c.Seek(itob(&kb, next))
				for gpos := next; gpos <= stop; gpos++ {
					if got, ok := btoi(k); !ok || got != gpos || v == nil {
						return &CorruptError{GPos: gpos, Reason: "global log gap while archiving"}
					}
					if digest {
						sum.Write(v)
					}
					if err := out.Put(bytes.Clone(k), bytes.Clone(v)); err != nil {
						return err
					}
					k, v = c.Next()
				}
				return nil
			})
		})
		if err != nil {
			return translate(err)
		}
		next = stop + 1
		a.o.Step("records")
	}
	// The log ends at to, also when it holds nothing (from > to).
	if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketLog).SetSequence(to) }); err != nil {
		return translate(err)
	}
	if digest {
		sum.Sum(a.res.Digest[:0])
	}
	return translate(db.Close())
}

// renameDurably renames from to to and syncs their directory.
func renameDurably(from, to string) error {
	if err := os.Rename(from, to); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(to))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Digest returns the SHA-256 of the bytes of the records from..to, in log
// order: what [ArchiveResult.Digest] is of the records an archive holds.
func (j *Journal) Digest(ctx context.Context, from, to uint64) ([32]byte, error) {
	var out [32]byte
	sum := sha256.New()
	err := j.view(ctx, func(tx *bolt.Tx) error {
		m := mappedOf(tx)
		c := tx.Bucket(bucketLog).Cursor()
		var kb [8]byte
		k, v := c.Seek(itob(&kb, from))
		for gpos := from; gpos <= to; gpos++ {
			if got, ok := btoi(k); !ok || got != gpos || !m.holds(v) {
				return &CorruptError{GPos: gpos, Reason: "global log gap"}
			}
			sum.Write(v)
			k, v = c.Next()
		}
		return nil
	})
	sum.Sum(out[:0])
	return out, err
}
