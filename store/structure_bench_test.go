package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/mcpledger/mcpledger/events"
)

// structBenchEvents is the size of BenchmarkCheckStructure's journal.
const structBenchEvents = 1_000_000

// structBenchJournal returns a journal of 1M events (64 sessions taking
// turns in appends of 100), built once and kept in the temp directory
// (mcpledger-bench/), since building it takes a while.
func structBenchJournal(b *testing.B) string {
	b.Helper()
	dir := filepath.Join(os.TempDir(), "mcpledger-bench")
	path := filepath.Join(dir, "structure-1m-v1.db")
	if _, err := os.Stat(path); err == nil {
		return path
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	tmp := path + ".building"
	_ = os.Remove(tmp)
	j, err := Open(tmp, &Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	sids := make([]uuid.UUID, 64)
	for i := range sids {
		sids[i] = events.NewID()
	}
	ctx := context.Background()
	var pend []*Pending
	for n := 0; n < structBenchEvents; n += 100 {
		evs := make([]events.Event, 100)
		for k := range evs {
			evs[k] = ev("server", n+k)
		}
		pend = append(pend, j.Submit(sids[(n/100)%len(sids)], Any, evs))
		if len(pend) == 64 {
			for _, p := range pend {
				if _, err := p.Wait(ctx); err != nil {
					b.Fatal(err)
				}
			}
			pend = pend[:0]
		}
	}
	for _, p := range pend {
		if _, err := p.Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		b.Fatal(err)
	}
	_ = os.Remove(IntentPath(tmp))
	return path
}

// BenchmarkCheckStructure measures the checks a writable Open runs before
// bbolt opens a 1M-event journal (checkFileFor: the metas, the freelist,
// the root page, and checkStructure's branch pages and right edges),
// warm, next to the floor: a plain writable bolt.Open and Close of the
// same file, which every Open pays. Run it with
//
//	go test ./store -run '^$' -bench BenchmarkCheckStructure -benchtime 50x
func BenchmarkCheckStructure(b *testing.B) {
	path := structBenchJournal(b)
	b.Run("bolt.Open", func(b *testing.B) {
		for range b.N {
			db, err := bolt.Open(path, 0o600, &bolt.Options{FreelistType: bolt.FreelistMapType, Timeout: time.Second})
			if err != nil {
				b.Fatal(err)
			}
			if err := db.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("check", func(b *testing.B) {
		for range b.N {
			if err := checkFileFor(path, time.Second, true); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("check-read-only", func(b *testing.B) { // what Open checked before
		for range b.N {
			if err := checkFileFor(path, time.Second, false); err != nil {
				b.Fatal(err)
			}
		}
	})
}
