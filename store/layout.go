package store

import (
	"encoding/binary"

	"github.com/google/uuid"
)

// Format and codec versions this build writes and reads. A file whose
// meta/format or meta/codec is greater is refused with [ErrNewerFormat].
const (
	// FormatVersion is the journal layout version (buckets and keys).
	FormatVersion = 1
	// CodecVersion is the record codec version (package events).
	CodecVersion = 1
)

// Top-level buckets. See doc.go for the layout.
var (
	bucketMeta    = []byte("meta")
	bucketStreams = []byte("streams")
	bucketLog     = []byte("log")
	bucketHeads   = []byte("heads")
	bucketIDs     = []byte("ids")
)

// Keys in the meta bucket. Values are decimal text (format, codec) and an
// RFC 3339 timestamp (created), readable with `bbolt get`.
var (
	keyFormat  = []byte("format")
	keyCodec   = []byte("codec")
	keyCreated = []byte("created")
)

// fillPercent is set on every bucket in every write transaction: keys are
// appended in order (seq, gpos, UUIDv7), so full pages are right.
const fillPercent = 1.0

// posLen is the length of a position value: session(16) ‖ seq(8).
const posLen = 16 + 8

// itob writes v as 8 bytes big-endian into b and returns it.
func itob(b *[8]byte, v uint64) []byte {
	binary.BigEndian.PutUint64(b[:], v)
	return b[:]
}

// btoi reads an 8-byte big-endian key; ok is false for any other length.
func btoi(b []byte) (uint64, bool) {
	if len(b) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(b), true
}

// putPos writes session ‖ seq into dst, which must be posLen long.
func putPos(dst []byte, sid uuid.UUID, seq uint64) {
	copy(dst, sid[:])
	binary.BigEndian.PutUint64(dst[16:], seq)
}

// parsePos reads a position value; ok is false if it is not posLen long.
func parsePos(v []byte) (sid uuid.UUID, seq uint64, ok bool) {
	if len(v) != posLen {
		return sid, 0, false
	}
	copy(sid[:], v)
	return sid, binary.BigEndian.Uint64(v[16:]), true
}
