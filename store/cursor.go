package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	bolt "go.etcd.io/bbolt"
)

// Cursors are how far a consumer of the journal (an exporter shipping it
// elsewhere) has delivered the log, stored beside the log under the
// consumer's name so that it survives the process and the file is all
// there is to back up. Like checkpoints they are derived: not events,
// never a commit point, and losing one makes its consumer deliver again,
// never lose anything. Only the process holding the journal for writing
// saves one; a consumer beside a writer keeps its position elsewhere.
//
// Layout: cursors/<name> = crc32c 4B BE ‖ gpos 8B BE ‖ from 8B BE.

var bucketCursors = []byte("cursors")

// MaxCursorName bounds a cursor's name in bytes.
const MaxCursorName = 64

// ErrCursorDamaged is the error of a stored cursor whose bytes do not
// match their checksum or do not describe a position in the log: its
// consumer should start again from the log's start (delivering again).
var ErrCursorDamaged = errors.New("store: cursor damaged")

// Cursor is a consumer's position in the log.
type Cursor struct {
	// GPos is the global position of the last event delivered (0: none).
	GPos uint64
	// From is where the consumer reads again to rebuild what it keeps
	// across events (a span started before GPos and not yet ended), from
	// 1 to GPos+1. It is GPos+1 for a consumer that keeps nothing.
	From uint64
}

// cursorLen is the length of a stored cursor's value.
const cursorLen = 20 // crc32c 4 ‖ gpos 8 ‖ from 8

// SaveCursor stores c under name, durably: it returns after its own
// commit. It fails with [ErrReadOnly], [ErrClosed], or [ErrInvalid] for
// an empty name or one over [MaxCursorName] bytes, a From outside 1 to
// GPos+1, or a GPos past the log's end.
func (j *Journal) SaveCursor(ctx context.Context, name string, c Cursor) error {
	if j.readOnly {
		return ErrReadOnly
	}
	if name == "" || len(name) > MaxCursorName {
		return fmt.Errorf("%w: cursor name %q: give 1 to %d bytes", ErrInvalid, name, MaxCursorName)
	}
	if c.From == 0 || c.From > c.GPos+1 {
		return fmt.Errorf("%w: cursor %q reads again from %d, outside 1 to %d (one past its position)", ErrInvalid, name, c.From, c.GPos+1)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if j.isClosed() {
		return ErrClosed
	}
	j.txMu.Lock()
	defer j.txMu.Unlock()
	return translate(j.update(func(tx *bolt.Tx) error {
		if last := tx.Bucket(bucketLog).Sequence(); c.GPos > last {
			return fmt.Errorf("%w: cursor %q at gpos %d, past the log's end (%d)", ErrInvalid, name, c.GPos, last)
		}
		b, err := tx.CreateBucketIfNotExists(bucketCursors)
		if err != nil {
			return err
		}
		v := make([]byte, cursorLen)
		binary.BigEndian.PutUint64(v[4:], c.GPos)
		binary.BigEndian.PutUint64(v[12:], c.From)
		binary.BigEndian.PutUint32(v, crc32.Checksum(v[4:], castagnoli))
		return b.Put([]byte(name), v)
	}))
}

// Cursor returns the cursor stored under name. It fails with
// [ErrNotFound] when none is, and with [ErrCursorDamaged] when the stored
// one cannot be trusted.
func (j *Journal) Cursor(ctx context.Context, name string) (Cursor, error) {
	var c Cursor
	err := j.view(ctx, func(tx *bolt.Tx) error {
		var v []byte
		if b := tx.Bucket(bucketCursors); b != nil {
			v = b.Get([]byte(name))
		}
		if v == nil {
			return fmt.Errorf("%w: no cursor %q", ErrNotFound, name)
		}
		if len(v) != cursorLen || binary.BigEndian.Uint32(v) != crc32.Checksum(v[4:], castagnoli) {
			return fmt.Errorf("%w: %q fails its checksum: the consumer starts again from the log's start", ErrCursorDamaged, name)
		}
		c = Cursor{GPos: binary.BigEndian.Uint64(v[4:]), From: binary.BigEndian.Uint64(v[12:])}
		if last := tx.Bucket(bucketLog).Sequence(); c.GPos > last || c.From == 0 || c.From > c.GPos+1 {
			return fmt.Errorf("%w: %q at gpos %d (from %d), outside the log (1..%d)", ErrCursorDamaged, name, c.GPos, c.From, last)
		}
		return nil
	})
	return c, err
}

// copyBucket copies src's bucket name, if any, into dst: the live
// journal an archive writes keeps its consumers' cursors (positions
// survive an archive).
func copyBucket(dst, src *bolt.Tx, name []byte) error {
	b := src.Bucket(name)
	if b == nil {
		return nil
	}
	out, err := dst.CreateBucket(name)
	if err != nil {
		return err
	}
	return b.ForEach(func(k, v []byte) error { return out.Put(bytes.Clone(k), bytes.Clone(v)) })
}
