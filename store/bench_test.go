package store_test

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/store"
	"github.com/mcpledger/mcpledger/store/storetest"
)

// BenchmarkAppend measures durable appends (fsync on), one event of about
// 200 bytes per Append, each producer with its own session, b.N events in
// total; and, as baselines, raw bbolt with one Update per event and with
// 1,000 events per Update.
func BenchmarkAppend(b *testing.B) {
	for _, p := range []int{1, 8, 64} {
		b.Run("producers="+strconv.Itoa(p), func(b *testing.B) { benchProducers(b, p) })
	}
	b.Run("baseline=update-per-event", func(b *testing.B) { benchRaw(b, 1) })
	b.Run("baseline=batch-1000", func(b *testing.B) { benchRaw(b, 1000) })
}

func benchProducers(b *testing.B, producers int) {
	j, err := store.Open(filepath.Join(b.TempDir(), "journal.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	ctx := context.Background()
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i := range producers {
		sid := events.NewID()
		wg.Go(func() {
			for n := 0; left.Add(-1) >= 0; n++ {
				ev := []events.Event{storetest.Event("server-"+strconv.Itoa(i), n, testTime)}
				if _, err := j.Append(ctx, sid, store.Any, ev); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
}

// benchRaw appends pre-built records of the same events straight into one
// bbolt bucket, perTx per Update, fsync on, FillPercent 1.0.
func benchRaw(b *testing.B, perTx int) {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "raw.db"), 0o600, &bolt.Options{FreelistType: bolt.FreelistMapType})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	name := []byte("events")
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket(name); return err }); err != nil {
		b.Fatal(err)
	}
	enc := events.NewEncoder()
	sid := events.NewID()
	var arena []byte
	b.ResetTimer()
	start := time.Now()
	for seq := 0; seq < b.N; {
		err := db.Update(func(tx *bolt.Tx) error {
			bk := tx.Bucket(name)
			bk.FillPercent = 1.0
			arena = arena[:0]
			for k := 0; k < perTx && seq < b.N; k++ {
				seq++
				e := storetest.Event("server-0", seq, testTime)
				e.ID, e.Session, e.Seq, e.GPos = events.NewID(), sid, uint64(seq), uint64(seq)
				off := len(arena)
				var err error
				if arena, err = enc.Append(arena, &e); err != nil {
					return err
				}
				var key [8]byte
				binary.BigEndian.PutUint64(key[:], uint64(seq))
				if err := bk.Put(key[:], arena[off:len(arena):len(arena)]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
}

// replayEvents is the size of BenchmarkReplay's journal.
const replayEvents = 200_000

var replay struct {
	once sync.Once
	dir  string
	err  error
}

// replayJournal builds, once per test binary, a journal of replayEvents
// events: 64 sessions interleaved in appends of 50 events, NoSync.
func replayJournal(b *testing.B) string {
	replay.once.Do(func() {
		if replay.dir, replay.err = os.MkdirTemp("", "store-replay-"); replay.err != nil {
			return
		}
		j, err := store.Open(filepath.Join(replay.dir, "journal.db"), &store.Options{NoSync: true})
		if err != nil {
			replay.err = err
			return
		}
		defer j.Close()
		sids := make([]uuid.UUID, 64)
		for i := range sids {
			sids[i] = events.NewID()
		}
		evs := make([]events.Event, 50)
		for n := 0; n < replayEvents; n += len(evs) {
			i := (n / len(evs)) % len(sids)
			for k := range evs {
				evs[k] = storetest.Event("server-"+strconv.Itoa(i), n+k, testTime.Add(time.Duration(n+k)*time.Millisecond))
			}
			if _, err := j.Append(context.Background(), sids[i], store.Any, evs); err != nil {
				replay.err = err
				return
			}
		}
	})
	if replay.err != nil {
		b.Fatal(replay.err)
	}
	return filepath.Join(replay.dir, "journal.db")
}

func cleanupReplay() {
	if replay.dir != "" {
		os.RemoveAll(replay.dir)
	}
}

// BenchmarkReplay measures a full ReadAll (global order, decode of every
// event) of a journal of 200,000 events, warm.
func BenchmarkReplay(b *testing.B) {
	path := replayJournal(b)
	j, err := store.Open(path, &store.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		n := 0
		if err := j.ReadAll(ctx, 1, func(events.Event) error { n++; return nil }); err != nil {
			b.Fatal(err)
		}
		if n != replayEvents {
			b.Fatalf("replayed %d events, want %d", n, replayEvents)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N*replayEvents)/elapsed.Seconds(), "events/s")
}
