package runtimetest

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// RawCommits is the journal floor of Audit mode for the benchmarks: raw
// bbolt (fsync on, FillPercent 1.0, hashmap freelist, as the store
// configures it), a 250-byte record under a big-endian sequence. An audit
// call commits twice in sequence (call.started before the request,
// call.finished before the reply); a baseline that makes the direct call
// between two such commits is what any write-ahead journal on bbolt pays
// on this disk. OpenRawWAL gives the same floor for a journal that syncs
// once per commit (rawwal.go).
//
// Concurrent commits are grouped, as the store's are: a lone caller
// commits its record at once, in its own goroutine; callers that come
// while a commit runs wait, and the first of them then commits all their
// records in one transaction. So the floor at c=16 is what bbolt's commit
// allows when every commit is shared.
type RawCommits struct {
	// store durably stores the records first..first+n-1 in one commit.
	store   func(first uint64, n int) error
	db      *bolt.DB // bbolt's floor (nil for the WAL's)
	wal     *rawWAL  // the single-sync floor's log (nil for bbolt's)
	seq     uint64   // of the last record; written by the leader only
	commits int      // commits made; written by the leader only
	val     []byte

	mu      sync.Mutex
	leading bool         // a commit runs, or is handed on
	waiting []chan error // callers whose records the next commit carries
}

// errLead hands the next commit to a waiting caller.
var errLead = errors.New("runtimetest: lead the next commit")

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
	r := &RawCommits{db: db, val: rawRecord()}
	r.store = r.boltStore
	return r
}

// rawRecord is the floor's record: 250 bytes, about a call record's size.
func rawRecord() []byte {
	val := make([]byte, 250)
	for i := range val {
		val[i] = byte('a' + i%26)
	}
	return val
}

// Commit durably stores one record, in a commit it may share.
func (r *RawCommits) Commit() error {
	r.mu.Lock()
	if r.leading {
		done := make(chan error, 1)
		r.waiting = append(r.waiting, done)
		r.mu.Unlock()
		if err := <-done; err != errLead {
			return err
		}
		r.mu.Lock() // leading was kept true for this caller
	}
	r.leading = true
	batch := r.waiting
	r.waiting = nil
	r.mu.Unlock()
	err := r.commit(1 + len(batch))
	for _, c := range batch {
		c <- err
	}
	r.mu.Lock()
	if len(r.waiting) > 0 { // came during the commit: the first leads
		next := r.waiting[0]
		r.waiting = r.waiting[1:]
		next <- errLead
	} else {
		r.leading = false
	}
	r.mu.Unlock()
	return err
}

// commit stores n records in one commit.
func (r *RawCommits) commit(n int) error {
	r.commits++
	first := r.seq + 1
	r.seq += uint64(n)
	return r.store(first, n)
}

// boltStore stores records first..first+n-1 in one bbolt transaction.
func (r *RawCommits) boltStore(first uint64, n int) error {
	return r.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte("log"))
		bk.FillPercent = 1.0
		for i := range uint64(n) {
			var k [8]byte
			binary.BigEndian.PutUint64(k[:], first+i)
			if err := bk.Put(k[:], r.val); err != nil {
				return err
			}
		}
		return nil
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
