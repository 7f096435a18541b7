package runtimetest

import (
	"encoding/binary"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// RawCommits is the journal floor of Audit mode for the benchmarks: raw
// bbolt, one db.Update per record (fsync on, FillPercent 1.0, hashmap
// freelist, as the store configures it), a 250-byte record under a
// big-endian sequence. An audit call commits twice in sequence (call.started
// before the request, call.finished before the reply); a baseline that
// makes the direct call between two such commits is what any write-ahead
// journal on bbolt pays on this disk.
type RawCommits struct {
	db  *bolt.DB
	seq uint64
	val []byte
}

// OpenRawCommits opens the floor journal in a temporary directory, closed
// when the benchmark ends.
func OpenRawCommits(b testing.TB) *RawCommits {
	b.Helper()
	db, err := bolt.Open(filepath.Join(b.TempDir(), "raw.db"), 0o600, &bolt.Options{FreelistType: bolt.FreelistMapType})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("log")); return err }); err != nil {
		b.Fatal(err)
	}
	val := make([]byte, 250)
	for i := range val {
		val[i] = byte('a' + i%26)
	}
	return &RawCommits{db: db, val: val}
}

// Commit durably stores one record.
func (r *RawCommits) Commit() error {
	return r.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte("log"))
		bk.FillPercent = 1.0
		r.seq++
		var k [8]byte
		binary.BigEndian.PutUint64(k[:], r.seq)
		return bk.Put(k[:], r.val)
	})
}

// Around returns call wrapped between two commits, as an audit call is.
func (r *RawCommits) Around(call func() error) func() error {
	return func() error {
		if err := r.Commit(); err != nil {
			return err
		}
		if err := call(); err != nil {
			return err
		}
		return r.Commit()
	}
}
