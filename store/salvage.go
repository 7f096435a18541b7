package store

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/mcpledger/mcpledger/events"
)

// ErrTargetExists is returned by [Salvage] when its target file exists:
// salvage never writes over a file.
var ErrTargetExists = errors.New("store: salvage target exists")

// SalvageOptions configure [Salvage].
type SalvageOptions struct {
	// Logger receives progress (nil: silent).
	Logger *slog.Logger
	// LockTimeout bounds the wait for a writer of the damaged file to let
	// go (default DefaultLockTimeout).
	LockTimeout time.Duration
}

// SalvageReport says what [Salvage] copied and what it lost.
type SalvageReport struct {
	// Source and Target are the damaged file and the new journal.
	Source, Target string
	// Pages is the number of leaf pages the scan read.
	Pages uint64
	// Events is the number of events copied, Sessions the number of
	// sessions with at least one.
	Events   uint64
	Sessions int
	// Lost counts the sessions that lost events (or may have: their head
	// is lost too), Gone those none of whose records are left.
	Lost, Gone int
	// PerSession lists every session found (by a record or by its head),
	// in id order.
	PerSession []SalvagedSession
	// Base is the journal's base state (after an archive).
	Base SalvagedBase
	// Checkpoints is the number of checkpoints found; they are not
	// copied (a reader saves new ones).
	Checkpoints int
	// Verified is what Verify checked on the new journal.
	Verified VerifyReport
}

// SalvagedSession is what [Salvage] did with one session.
type SalvagedSession struct {
	Session uuid.UUID
	// Kept is the number of events copied: seqs 1 to Kept.
	Kept uint64
	// HeadSeq is the last seq the session's head names, 0 when its head
	// is lost (then whether events followed Kept is unknown).
	HeadSeq uint64
	// FirstLost is the first seq not copied, 0 when none is known lost;
	// Reason says why it was not.
	FirstLost uint64
	Reason    string
	// Stranded counts the records found after FirstLost, which cannot be
	// copied without it.
	Stranded int
}

// SalvagedBase is what [Salvage] did with the base state.
type SalvagedBase struct {
	// GPos is meta/base (0: the journal was never archived).
	GPos uint64
	// Kept says the base state read and was copied.
	Kept bool
	// Reason says why it was lost; Archive names the archive journal
	// holding the records it folded (from the latest journal.archived
	// record found), "" when none was found.
	Reason  string
	Archive string
}

// Salvage copies every event of the journal file src that still reads
// and verifies into a new journal at dst, and reports what was lost. It
// does not trust the file's bbolt tree: it reads the pages raw (see
// salvage_scan.go), so it works on a truncated file and on one with
// damaged pages anywhere, metas included. Each session keeps its events
// from seq 1 up to the first one that is missing, undecodable or out of
// order, with their ids, seqs, times and payloads; global positions are
// renumbered in the old log order (after the base, if the base state is
// kept). A session whose head reads and whose records all do is checked
// against its hash chain. The base state (meta/base) is kept if it reads
// and checks; checkpoints are dropped. The new journal is verified
// before Salvage returns.
//
// src is opened read-only, under a shared lock (ErrLocked while a writer
// holds it), and never written. dst must not exist ([ErrTargetExists]);
// on failure it is removed.
func Salvage(ctx context.Context, src, dst string, opts *SalvageOptions) (rep SalvageReport, err error) {
	var o SalvageOptions
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.LockTimeout <= 0 {
		o.LockTimeout = DefaultLockTimeout
	}
	rep = SalvageReport{Source: src, Target: dst}
	f, err := os.Open(src)
	if err != nil {
		return rep, fmt.Errorf("salvage: %w", err)
	}
	defer f.Close()
	if err := lockShared(f, o.LockTimeout); err != nil {
		return rep, fmt.Errorf("salvage %s: %w (stop the process writing to it first)", src, err)
	}
	out, err := os.OpenFile(dst, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return rep, fmt.Errorf("salvage: %w: %s (salvage never writes over a file: name a new one with -o)", ErrTargetExists, dst)
	}
	if err != nil {
		return rep, fmt.Errorf("salvage: %w", err)
	}
	_ = out.Close()
	defer func() {
		if err != nil {
			_ = os.Remove(dst)
			_ = os.Remove(IntentPath(dst))
		}
	}()
	res, err := scanPages(f)
	if err != nil {
		return rep, fmt.Errorf("salvage: reading %s: %w", src, err)
	}
	o.Logger.Info("salvage: scanned", logKeyPath, src, "pages", res.pages, logKeyRecords, len(res.recs))
	rep.Pages, rep.Checkpoints = res.pages, res.checkpoints
	keep := plan(f, res, &rep)
	if err := writeSalvaged(ctx, f, dst, res, &rep, keep); err != nil {
		return rep, fmt.Errorf("salvage: writing %s: %w", dst, err)
	}
	j, err := Open(dst, &Options{ReadOnly: true})
	if err != nil {
		return rep, fmt.Errorf("salvage: %w", err)
	}
	defer j.Close()
	if rep.Verified, err = j.Verify(ctx); err != nil {
		return rep, fmt.Errorf("salvage: the new journal fails verify (a bug: report it): %w", err)
	}
	return rep, nil
}

// plan decides what to copy: per session, the records of its longest
// good prefix; it fills rep's sessions and base, and returns the records
// to copy in their old log order.
func plan(f *os.File, res *scanResult, rep *SalvageReport) []found {
	bySession := res.sessionRecs()
	for sid := range res.heads {
		if _, ok := bySession[sid]; !ok {
			bySession[sid] = nil
		}
	}
	var keep []found
	sum := sha256.New()
	for sid, recs := range bySession {
		s := SalvagedSession{Session: sid, HeadSeq: res.heads[sid].LastSeq}
		var chain [32]byte
		var last uint64 // the position of the last record kept
		i := 0
		for ; i < len(recs); i++ {
			r := recs[i]
			want := s.Kept + 1
			if r.seq < want {
				continue // another copy of a seq kept already
			}
			if r.seq > want {
				s.FirstLost, s.Reason = want, fmt.Sprintf("seq %d is not in the file (its page is damaged or gone)", want)
				break
			}
			if r.gpos <= last {
				s.FirstLost, s.Reason = want, fmt.Sprintf("seq %d is stored at position %d, before seq %d's %d", want, r.gpos, s.Kept, last)
				break
			}
			if r.bad != "" {
				s.FirstLost, s.Reason = want, fmt.Sprintf("seq %d %s", want, r.bad)
				break
			}
			b := make([]byte, r.n)
			if _, err := f.ReadAt(b, r.off); err != nil {
				s.FirstLost, s.Reason = want, fmt.Sprintf("seq %d cannot be read again: %v", want, err)
				break
			}
			sum.Reset()
			sum.Write(chain[:])
			sum.Write(b)
			sum.Sum(chain[:0])
			keep = append(keep, r)
			s.Kept, last = want, r.gpos
		}
		for ; i < len(recs); i++ {
			if recs[i].seq > s.FirstLost && s.FirstLost != 0 {
				s.Stranded++
			}
		}
		h, headOK := res.heads[sid]
		if s.FirstLost == 0 && headOK && s.Kept < h.LastSeq {
			s.FirstLost, s.Reason = s.Kept+1, fmt.Sprintf("seq %d is not in the file (its page is damaged or gone)", s.Kept+1)
		} else if s.FirstLost == 0 && headOK && s.Kept == h.LastSeq && !bytes.Equal(chain[:], h.Head[:]) {
			s.Reason = "its records' hash chain does not match its head: a record was replaced by another with a valid CRC; they are kept as found"
		} else if s.FirstLost == 0 && !headOK {
			s.Reason = "its head is lost: whether events followed the last one kept is unknown"
		}
		if s.Kept == 0 {
			rep.Gone++
			if len(recs) == 0 {
				s.Reason = "none of its records is left in the file"
			}
		} else {
			rep.Sessions++
		}
		if s.FirstLost != 0 || !headOK {
			rep.Lost++
		}
		rep.Events += s.Kept
		rep.PerSession = append(rep.PerSession, s)
	}
	slices.SortFunc(rep.PerSession, func(a, b SalvagedSession) int { return slices.Compare(a.Session[:], b.Session[:]) })
	slices.SortFunc(keep, func(a, b found) int { return cmp.Compare(a.gpos, b.gpos) })
	rep.Base = SalvagedBase{GPos: res.base}
	if res.base != 0 && res.baseState == nil {
		rep.Base.Reason = fmt.Sprintf("the base state (the fold of the %d archived records) is lost or fails its checksum", res.base)
		rep.Base.Archive = res.archive
	} else if res.base != 0 {
		rep.Base.Kept = true
	}
	return keep
}

// salvageBatch bounds the events of one append, and salvageWindow the
// appends submitted and not yet acknowledged.
const (
	salvageBatch  = 1024
	salvageWindow = 64
)

// writeSalvaged writes the records keep (in log order) read from f into
// the new journal dst (an empty file).
func writeSalvaged(ctx context.Context, f *os.File, dst string, res *scanResult, rep *SalvageReport, keep []found) error {
	if rep.Base.Kept {
		if err := writeBase(dst, res.base, res.baseState); err != nil {
			return err
		}
	}
	j, err := Open(dst, &Options{NoSync: true})
	if err != nil {
		return err
	}
	defer j.Close()
	dec := events.NewDecoder()
	versions := map[uuid.UUID]uint64{}
	var pending []*Pending
	wait := func(n int) error {
		for len(pending) > n {
			if _, err := pending[0].Wait(ctx); err != nil {
				return err
			}
			pending = pending[1:]
		}
		return nil
	}
	for i := 0; i < len(keep); {
		if err := ctx.Err(); err != nil {
			return err
		}
		sid, end := keep[i].sid, nextBatch(keep, i, salvageBatch)
		var evs []events.Event
		for ; i < end; i++ {
			b := make([]byte, keep[i].n)
			if _, err := f.ReadAt(b, keep[i].off); err != nil {
				return err
			}
			e, err := dec.Decode(b)
			if err != nil { // plan decoded it: the file changed under the lock?
				return fmt.Errorf("session %s seq %d no longer decodes: %w", sid, keep[i].seq, err)
			}
			evs = append(evs, e)
		}
		pending = append(pending, j.Submit(sid, Exact(versions[sid]), evs))
		versions[sid] += uint64(len(evs))
		if err := wait(salvageWindow); err != nil {
			return err
		}
	}
	return errors.Join(wait(0), j.Close(), syncFile(dst))
}

// nextBatch returns the end of the append that starts at keep[i]: the
// records after it of the same session, at most max in all.
func nextBatch(keep []found, i, max int) int {
	end := i + 1
	for end < len(keep) && end-i < max && keep[end].sid == keep[i].sid {
		end++
	}
	return end
}

// writeBase writes the journal's meta, meta/base and meta/base_state into
// the new file dst, and starts its log after base.
func writeBase(dst string, base uint64, state []byte) error {
	db, err := bolt.Open(dst, 0o600, &bolt.Options{FreelistType: bolt.FreelistMapType, Timeout: time.Second})
	if err != nil {
		return translate(err)
	}
	defer db.Close()
	if err := initMeta(db, false); err != nil {
		return err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if err := meta.Put(keyBase, strconv.AppendUint(nil, base, 10)); err != nil {
			return err
		}
		if err := meta.Put(keyBaseState, sealValue(state)); err != nil {
			return err
		}
		return tx.Bucket(bucketLog).SetSequence(base)
	})
	return translate(errors.Join(err, db.Close()))
}

// syncFile makes path and its directory entry durable.
func syncFile(path string) error {
	var errs []error
	for _, p := range []string{path, filepath.Dir(path)} {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		errs = append(errs, f.Sync(), f.Close())
	}
	return errors.Join(errs...)
}
