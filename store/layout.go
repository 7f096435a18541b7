package store

import (
	"encoding/binary"

	"github.com/google/uuid"
)

// Format and codec versions this build writes and reads. A file whose
// meta/format or meta/codec is greater is refused with [ErrNewerFormat];
// a file of an older format with [ErrNotJournal] (format 1 never left
// development, so there is no converter).
const (
	// FormatVersion is the journal layout version (buckets and keys).
	// Format 2 stores records in the global log, not in per-session
	// buckets; see doc.go.
	FormatVersion = 2
	// CodecVersion is the record codec version (package events).
	CodecVersion = 1
)

// Top-level buckets. See doc.go for the layout.
var (
	bucketMeta     = []byte("meta")
	bucketLog      = []byte("log")
	bucketSessions = []byte("sessions")
	bucketIndex    = []byte("index")
)

// Keys in the meta bucket. Values are decimal text (format, codec) and an
// RFC 3339 timestamp (created), readable with `bbolt get`.
var (
	keyFormat  = []byte("format")
	keyCodec   = []byte("codec")
	keyCreated = []byte("created")
)

// Fill percents, set on the buckets in every write transaction (bbolt does
// not persist them). log/ and sessions/ only ever grow at their right edge
// with values that never change size (records; fixed-size heads), so full
// pages are right. index/ takes each session's segments in the middle of
// the key space, so it keeps bbolt's default half-full split.
const (
	fillLog      = 1.0
	fillSessions = 1.0
	fillIndex    = 0.5
)

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

// indexKeyLen is the length of an index/ key: session(16) ‖ seq(8).
const indexKeyLen = 16 + 8

// indexKey writes session ‖ seq into b and returns it.
func indexKey(b *[indexKeyLen]byte, sid uuid.UUID, seq uint64) []byte {
	copy(b[:], sid[:])
	binary.BigEndian.PutUint64(b[16:], seq)
	return b[:]
}

// parseIndexKey reads an index/ key; ok is false for any other length.
func parseIndexKey(k []byte) (sid uuid.UUID, seq uint64, ok bool) {
	if len(k) != indexKeyLen {
		return sid, 0, false
	}
	copy(sid[:], k)
	return sid, binary.BigEndian.Uint64(k[16:]), true
}
