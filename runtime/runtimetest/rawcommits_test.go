package runtimetest

import (
	"encoding/binary"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestRawCommitsGroup checks the floor's group commit: concurrent commits
// store every record once, under the sequence 1..n, in fewer transactions
// than records; a lone caller's records take one transaction each.
func TestRawCommitsGroup(t *testing.T) {
	r := OpenRawCommits(t)
	for range 3 {
		if err := r.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if r.commits != 3 {
		t.Fatalf("3 sequential commits took %d transactions", r.commits)
	}
	commitConcurrently(t, r)
	const n = 3 + workers*each
	if r.commits >= n {
		t.Errorf("%d concurrent commits took %d transactions: none shared", workers*each, r.commits-3)
	}
	var keys []uint64
	if err := r.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("log")).ForEach(func(k, _ []byte) error {
			keys = append(keys, binary.BigEndian.Uint64(k))
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if len(keys) != n {
		t.Fatalf("%d records stored, want %d", len(keys), n)
	}
	for i, k := range keys {
		if k != uint64(i+1) {
			t.Fatalf("record %d has key %d", i+1, k)
		}
	}
	t.Logf("%d concurrent commits in %d transactions", workers*each, r.commits-3)
}

// workers commit each records apiece in commitConcurrently.
const workers, each = 16, 50

// commitConcurrently commits workers×each records from workers
// goroutines, which it joins, and fails t on any commit's error.
func commitConcurrently(t *testing.T, r *RawCommits) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for range workers {
		wg.Add(1)
		go func() { // joined below
			defer wg.Done()
			for range each {
				if err := r.Commit(); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
