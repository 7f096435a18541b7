package store

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"

	bolt "go.etcd.io/bbolt"
)

// Checkpoints are derived state a reader of the journal stored beside the
// log (the projections' fold of every event up to a global position), so
// that the next reader folds only the events after it. The journal holds
// them for its callers and knows nothing of their content: it stores each
// under its position with a checksum, keeps the newest [MaxCheckpoints],
// and reports a damaged one instead of returning its bytes. A checkpoint
// is never a commit point: losing one loses nothing that the log does not
// hold.
//
// Layout: checkpoints/<gpos 8B BE> = crc32c(data) 4B BE ‖ data.

// MaxCheckpoints is how many checkpoints the journal keeps; saving one
// more deletes the oldest.
const MaxCheckpoints = 8

// MaxCheckpointSize bounds one checkpoint's bytes.
const MaxCheckpointSize = 64 << 20

var bucketCheckpoints = []byte("checkpoints")

// ErrCheckpointDamaged is the error of a stored checkpoint whose bytes do
// not match their checksum, or whose position is past the log's end.
var ErrCheckpointDamaged = errors.New("store: checkpoint damaged")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checkpoint is one stored checkpoint.
type Checkpoint struct {
	// GPos is the global position of the last event the checkpoint
	// covers.
	GPos uint64
	// Data is what was saved, or nil when Err is set.
	Data []byte
	// Err wraps [ErrCheckpointDamaged] when the stored bytes cannot be
	// trusted.
	Err error
	// Base marks the journal's base state (see [Journal.Base]): the fold
	// of the records archived out of it, which no fold of its own records
	// can rebuild.
	Base bool
}

// SaveCheckpoint hands data, derived from the log's events up to and
// including gpos, to the journal. It is written in the transaction of the
// next commit, beside that commit's events (so it costs no commit of its
// own), or by Close when no commit comes; a later SaveCheckpoint before
// then replaces it. A checkpoint whose gpos is past the log's end when it
// is written is dropped and logged. It fails with [ErrReadOnly],
// [ErrClosed], or [ErrInvalid] for a gpos of 0 or data over
// [MaxCheckpointSize].
func (j *Journal) SaveCheckpoint(gpos uint64, data []byte) error {
	if j.readOnly {
		return ErrReadOnly
	}
	if gpos == 0 || len(data) > MaxCheckpointSize {
		return fmt.Errorf("%w: checkpoint at gpos %d of %d bytes", ErrInvalid, gpos, len(data))
	}
	if j.isClosed() {
		return ErrClosed
	}
	j.pendingCP.Store(&Checkpoint{GPos: gpos, Data: data})
	return nil
}

// putCheckpoint writes the pending checkpoint, if any, in tx, whose log
// ends at last, and deletes the oldest beyond MaxCheckpoints. It reports
// the checkpoint it took, for the caller to put back if tx fails.
func (j *Journal) putCheckpoint(tx *bolt.Tx, last uint64) (*Checkpoint, error) {
	cp := j.pendingCP.Swap(nil)
	if cp == nil {
		return nil, nil
	}
	if cp.GPos > last {
		j.log.Error("checkpoint past the log's end dropped", logKeyGPos, cp.GPos, "last", last)
		return cp, nil
	}
	b, err := tx.CreateBucketIfNotExists(bucketCheckpoints)
	if err != nil {
		return cp, err
	}
	var k [8]byte
	if err := b.Put(itob(&k, cp.GPos), sealValue(cp.Data)); err != nil {
		return cp, err
	}
	var keys [][]byte
	_ = b.ForEach(func(k, _ []byte) error { keys = append(keys, k); return nil })
	for _, k := range keys[:max(len(keys)-MaxCheckpoints, 0)] {
		if err := b.Delete(k); err != nil {
			return cp, err
		}
	}
	return cp, nil
}

// flushCheckpoint writes a pending checkpoint in a transaction of its
// own (Close calls it when no commit took the checkpoint).
func (j *Journal) flushCheckpoint() error {
	if j.pendingCP.Load() == nil {
		return nil
	}
	j.txMu.Lock()
	defer j.txMu.Unlock()
	var cp *Checkpoint
	err := j.update(func(tx *bolt.Tx) error {
		var err error
		cp, err = j.putCheckpoint(tx, tx.Bucket(bucketLog).Sequence())
		return err
	})
	if err != nil && cp != nil {
		j.log.Error("checkpoint", logKeyGPos, cp.GPos, logKeyError, err)
	}
	return translate(err)
}

// Checkpoints returns the stored checkpoints, oldest first, after the
// journal's base state if it has one (Base set). A damaged one is
// returned with its Err set and no Data.
func (j *Journal) Checkpoints(ctx context.Context) ([]Checkpoint, error) {
	var out []Checkpoint
	err := j.view(ctx, func(tx *bolt.Tx) error {
		out = out[:0]
		base := baseOf(tx)
		if base > 0 {
			cp := Checkpoint{GPos: base, Base: true}
			var ok bool
			if cp.Data, ok = unsealValue(tx.Bucket(bucketMeta).Get(keyBaseState)); !ok {
				cp.Err = fmt.Errorf("%w: the base state (the fold of the %d archived records) fails its checksum: restore the journal from a backup (no command rebuilds it from the archives yet)", ErrCheckpointDamaged, base)
			}
			out = append(out, cp)
		}
		b := tx.Bucket(bucketCheckpoints)
		if b == nil {
			return nil
		}
		last := tx.Bucket(bucketLog).Sequence()
		return b.ForEach(func(k, v []byte) error {
			gpos, ok := btoi(k)
			cp := Checkpoint{GPos: gpos}
			switch {
			case !ok:
				cp.Err = fmt.Errorf("%w: key %x is not a position", ErrCheckpointDamaged, k)
			case gpos <= base || gpos > last:
				cp.Err = fmt.Errorf("%w: at gpos %d, outside the log (%d..%d)", ErrCheckpointDamaged, gpos, base+1, last)
			default:
				if cp.Data, ok = unsealValue(v); !ok {
					cp.Err = fmt.Errorf("%w: at gpos %d, its checksum does not match its %d bytes", ErrCheckpointDamaged, gpos, max(len(v)-4, 0))
				}
			}
			out = append(out, cp)
			return nil
		})
	})
	return out, err
}

// DropCheckpoints deletes every stored checkpoint (and one not yet
// written). Readers then fold the log from its start until a new one is
// saved.
func (j *Journal) DropCheckpoints() error {
	if j.readOnly {
		return ErrReadOnly
	}
	if j.isClosed() {
		return ErrClosed
	}
	j.pendingCP.Store(nil)
	j.txMu.Lock()
	defer j.txMu.Unlock()
	return translate(j.update(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketCheckpoints) == nil {
			return nil
		}
		return tx.DeleteBucket(bucketCheckpoints)
	}))
}
