package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"

	bolt "go.etcd.io/bbolt"
)

// A journal that has been archived ([Archive]) starts later than gpos 1:
// meta/base holds the position of the last record moved out (its log runs
// gapless from base+1), and meta/base_state the fold of every record up
// to base that its reader handed to Archive, stored as a checkpoint is
// (crc32c ‖ data). [Journal.Checkpoints] returns it first, with Base set:
// it is the one checkpoint a fold of the journal cannot do without.
//
// An archive journal is sealed: meta/sealed says what it is, and Open
// refuses to write to it ([ErrSealed]).
var (
	keyBase      = []byte("base")
	keyBaseState = []byte("base_state")
	keySealed    = []byte("sealed")
)

// ErrSealed is returned by a writable Open of an archive journal.
var ErrSealed = errors.New("store: journal is a sealed archive (read it with read-only commands)")

// baseOf returns meta/base, 0 when absent. checkMeta has checked it.
func baseOf(tx *bolt.Tx) uint64 {
	n, _ := parseBase(tx.Bucket(bucketMeta).Get(keyBase))
	return n
}

// parseBase parses meta/base: absent is 0; otherwise decimal, as the
// versions are.
func parseBase(v []byte) (uint64, error) {
	if v == nil {
		return 0, nil
	}
	if len(v) > 20 {
		return 0, errors.New("too long")
	}
	return strconv.ParseUint(string(v), 10, 64)
}

// checkBase checks meta/base against the log: a journal with a base
// holds its state, and its log starts right after it.
func checkBase(tx *bolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	mp := mappedOf(tx)
	v := meta.Get(keyBase)
	if !mp.holds(v) {
		return fmt.Errorf("%w: meta/base points outside the file (damaged page)", ErrCorrupt)
	}
	base, err := parseBase(v)
	if err != nil {
		return fmt.Errorf("%w: meta/base is %s", ErrCorrupt, mp.quote(v))
	}
	if base == 0 {
		return nil
	}
	if meta.Get(keyBaseState) == nil {
		return fmt.Errorf("%w: meta/base is %d but the journal has no base state", ErrCorrupt, base)
	}
	if last := tx.Bucket(bucketLog).Sequence(); last < base {
		return fmt.Errorf("%w: meta/base is %d, past the log's end %d", ErrCorrupt, base, last)
	}
	return nil
}

// sealValue returns data prefixed with its crc32c, as checkpoints and the
// base state are stored.
func sealValue(data []byte) []byte {
	v := make([]byte, 4+len(data))
	binary.BigEndian.PutUint32(v, crc32.Checksum(data, castagnoli))
	copy(v[4:], data)
	return v
}

// unsealValue returns the data of a sealValue, or false when its
// checksum does not match.
func unsealValue(v []byte) ([]byte, bool) {
	if len(v) < 4 || binary.BigEndian.Uint32(v) != crc32.Checksum(v[4:], castagnoli) {
		return nil, false
	}
	return append([]byte(nil), v[4:]...), true
}

// Base returns the global position of the last record archived out of
// the journal (its log starts after it), 0 if none ever was.
func (j *Journal) Base() uint64 { return j.base }

// Sealed returns what meta/sealed says of an archive journal, "" for a
// live one.
func (j *Journal) Sealed() string { return j.sealed }
