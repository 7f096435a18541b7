package store_test

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
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
		b.Run("producers="+strconv.Itoa(p), func(b *testing.B) { benchProducers(b, p, false) })
	}
	b.Run("baseline=update-per-event", func(b *testing.B) { benchRaw(b, 1) })
	b.Run("baseline=batch-1000", func(b *testing.B) { benchRaw(b, 1000) })
	b.Run("baseline=group-commit-64", func(b *testing.B) { benchRawGroup(b, 64) })
}

// BenchmarkAppendShared is BenchmarkAppend's producers all appending to
// one session (with Any), as goroutines of one mcpledger process feeding
// its session would if each appended on its own.
func BenchmarkAppendShared(b *testing.B) {
	for _, p := range []int{8, 64} {
		b.Run("producers="+strconv.Itoa(p), func(b *testing.B) { benchProducers(b, p, true) })
	}
}

func benchProducers(b *testing.B, producers int, shared bool) {
	j, err := store.Open(filepath.Join(b.TempDir(), "journal.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	ctx := context.Background()
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	w0, c0 := store.WriteStats(j)
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	one := events.NewID()
	for i := range producers {
		sid := events.NewID()
		if shared {
			sid = one
		}
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
	reportCPU(b, cpu0, b.N)
	w1, c1 := store.WriteStats(j)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	reportCommits(b, w1-w0, int64(c1-c0))
}

// cpuTime returns the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the process's CPU time per event since cpu0: unlike
// events/s, it hardly depends on what else the machine is running.
func reportCPU(b *testing.B, cpu0 time.Duration, events int) {
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/1e3/float64(events), "cpu-µs/event")
}

// reportCommits reports events and page writes (data and meta pages, as
// counted by bbolt's TxStats) per commit.
func reportCommits(b *testing.B, writes, commits int64) {
	if commits > 0 {
		b.ReportMetric(float64(b.N)/float64(commits), "events/commit")
		b.ReportMetric(float64(writes)/float64(commits), "pages/commit")
	}
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
	st := db.Stats()
	w0, commits := st.TxStats.GetWrite(), int64(0)
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	for seq := 0; seq < b.N; {
		commits++
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
	reportCPU(b, cpu0, b.N)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	st = db.Stats()
	reportCommits(b, st.TxStats.GetWrite()-w0, commits)
}

// benchRawGroup is the ceiling for producers=64: journal-notes §3.3's
// single-writer group committer on raw bbolt, the same records (encoded
// by the producers) put under a global sequence in one bucket (FillPercent
// 1.0, hashmap freelist, fsync on): no sessions, no index, no hash chain,
// no retry check, and no yield before draining.
func benchRawGroup(b *testing.B, producers int) {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "raw.db"), 0o600,
		&bolt.Options{FreelistType: bolt.FreelistMapType, InitialMmapSize: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	name := []byte("events")
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket(name); return err }); err != nil {
		b.Fatal(err)
	}
	type req struct {
		rec  []byte
		done chan error
	}
	reqs := make(chan *req, 1024)
	quit := make(chan struct{})
	var commits int64
	writerDone := make(chan struct{})
	go func() { // the writer; ends when quit closes
		defer close(writerDone)
		var batch []*req
		for {
			select {
			case r := <-reqs:
				batch = append(batch[:0], r)
			case <-quit:
				return
			}
		drain:
			for {
				select {
				case r := <-reqs:
					batch = append(batch, r)
				default:
					break drain
				}
			}
			err := db.Update(func(tx *bolt.Tx) error {
				bk := tx.Bucket(name)
				bk.FillPercent = 1.0
				for _, r := range batch {
					seq, _ := bk.NextSequence()
					var k [8]byte
					binary.BigEndian.PutUint64(k[:], seq)
					if err := bk.Put(k[:], r.rec); err != nil {
						return err
					}
				}
				return nil
			})
			commits++
			for _, r := range batch {
				r.done <- err
			}
		}
	}()
	defer func() { close(quit); <-writerDone }()
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	st := db.Stats()
	w0 := st.TxStats.GetWrite()
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	for i := range producers {
		wg.Go(func() {
			enc := events.NewEncoder()
			sid := events.NewID()
			r := &req{done: make(chan error, 1)}
			for n := 0; left.Add(-1) >= 0; n++ {
				e := storetest.Event("server-"+strconv.Itoa(i), n, testTime)
				e.ID, e.Session, e.Seq = events.NewID(), sid, uint64(n+1)
				rec, err := enc.Append(nil, &e)
				if err != nil {
					b.Error(err)
					return
				}
				r.rec = rec
				reqs <- r
				if err := <-r.done; err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	reportCPU(b, cpu0, b.N)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	st = db.Stats()
	reportCommits(b, st.TxStats.GetWrite()-w0, commits)
}

// BenchmarkFdatasync measures the disk under the benchmarks: a 4 KiB
// write at one of 64 offsets in a 1 MiB file, then fdatasync. A bbolt
// commit makes two such syncs; compare runs by it.
func BenchmarkFdatasync(b *testing.B) {
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "f"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, 1<<20), 0); err != nil {
		b.Fatal(err)
	}
	if err := syscall.Fdatasync(int(f.Fd())); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 4096)
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		buf[0] = byte(i)
		if _, err := f.WriteAt(buf, int64(i%64)*4096); err != nil {
			b.Fatal(err)
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "syncs/s")
}

// replayEvents is the size of BenchmarkReplay's journal.
const replayEvents = 200_000

// fixture is a journal built once per test binary.
type fixture struct {
	once sync.Once
	dir  string
	sids []uuid.UUID
	err  error
}

var (
	replay      fixture // 64 sessions, appends of 50 events in turn
	interleaved fixture // 64 sessions, appends of one event in turn
)

// build makes f's journal of replayEvents events: 64 sessions taking turns
// in appends of perAppend events, NoSync. Each round of 64 appends is
// submitted at once, so the writer commits it in one transaction.
func (f *fixture) build(b *testing.B, perAppend int) string {
	f.once.Do(func() {
		if f.dir, f.err = os.MkdirTemp("", "store-bench-"); f.err != nil {
			return
		}
		j, err := store.Open(filepath.Join(f.dir, "journal.db"), &store.Options{NoSync: true})
		if err != nil {
			f.err = err
			return
		}
		defer j.Close()
		f.sids = make([]uuid.UUID, 64)
		for i := range f.sids {
			f.sids[i] = events.NewID()
		}
		pend := make([]*store.Pending, 0, len(f.sids))
		for n := 0; n < replayEvents; {
			pend = pend[:0]
			for i := 0; i < len(f.sids) && n < replayEvents; i++ {
				evs := make([]events.Event, perAppend)
				for k := range evs {
					evs[k] = storetest.Event("server-"+strconv.Itoa(i), n+k, testTime.Add(time.Duration(n+k)*time.Millisecond))
				}
				pend = append(pend, j.Submit(f.sids[i], store.Any, evs))
				n += perAppend
			}
			for _, p := range pend {
				if _, err := p.Wait(context.Background()); err != nil {
					f.err = err
					return
				}
			}
		}
	})
	if f.err != nil {
		b.Fatal(f.err)
	}
	return filepath.Join(f.dir, "journal.db")
}

func cleanupReplay() {
	for _, f := range []*fixture{&replay, &interleaved} {
		if f.dir != "" {
			os.RemoveAll(f.dir)
		}
	}
}

// BenchmarkReplay measures a full ReadAll (global order, decode of every
// event) of a journal of 200,000 events, warm.
func BenchmarkReplay(b *testing.B) {
	path := replay.build(b, 50)
	j, err := store.Open(path, &store.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
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
	reportCPU(b, cpu0, b.N*replayEvents)
	b.ReportMetric(float64(b.N*replayEvents)/elapsed.Seconds(), "events/s")
}

// BenchmarkReadSession measures ReadSession of each of the 64 sessions of
// a 200,000-event journal in turn (about 3,125 events each), warm: sessions
// that took turns in appends of 50 events (BenchmarkReplay's journal), and
// in appends of one event, where no two consecutive events of a session
// are stored next to each other.
func BenchmarkReadSession(b *testing.B) {
	for _, c := range []struct {
		name      string
		f         *fixture
		perAppend int
	}{{"append=50", &replay, 50}, {"append=1", &interleaved, 1}} {
		b.Run(c.name, func(b *testing.B) {
			path := c.f.build(b, c.perAppend)
			j, err := store.Open(path, &store.Options{ReadOnly: true})
			if err != nil {
				b.Fatal(err)
			}
			defer j.Close()
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			start, cpu0, total := time.Now(), cpuTime(), 0
			for i := range b.N {
				sid := c.f.sids[i%len(c.f.sids)]
				n := 0
				if err := j.ReadSession(ctx, sid, 1, func(events.Event) error { n++; return nil }); err != nil {
					b.Fatal(err)
				}
				if n < replayEvents/len(c.f.sids)-c.perAppend {
					b.Fatalf("read %d events, want about %d", n, replayEvents/len(c.f.sids))
				}
				total += n
			}
			elapsed := time.Since(start)
			b.StopTimer()
			reportCPU(b, cpu0, total)
			b.ReportMetric(float64(total)/elapsed.Seconds(), "events/s")
			b.ReportMetric(float64(elapsed.Microseconds())/float64(b.N), "µs/session")
		})
	}
}

// BenchmarkSessions measures Sessions() on a journal of 1,000 sessions of
// 10 events each, warm.
func BenchmarkSessions(b *testing.B) {
	j, err := store.Open(filepath.Join(b.TempDir(), "journal.db"), &store.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	ctx := context.Background()
	pend := make([]*store.Pending, 0, 1000)
	for i := range 1000 {
		evs := make([]events.Event, 10)
		for k := range evs {
			evs[k] = storetest.Event("server-"+strconv.Itoa(i%8), k, testTime)
		}
		pend = append(pend, j.Submit(events.NewID(), store.NoStream, evs))
	}
	for _, p := range pend {
		if _, err := p.Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		infos, err := j.Sessions(ctx)
		if err != nil || len(infos) != 1000 {
			b.Fatalf("Sessions = %d, %v", len(infos), err)
		}
	}
}
