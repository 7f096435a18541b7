package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mcpledger/mcpledger/events"
)

// openWriter opens a journal for a writer test, closed when t ends.
func openWriter(t *testing.T, o Options) *Journal {
	t.Helper()
	o.NoSync = true
	j, err := Open(filepath.Join(t.TempDir(), "j.db"), &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

// holdWriter keeps the writer from committing (and appenders from
// committing directly) until the returned function is called, or t ends.
func holdWriter(t *testing.T, j *Journal) (release func()) {
	j.txMu.Lock()
	var once sync.Once
	release = func() { once.Do(j.txMu.Unlock) }
	t.Cleanup(release) // before Close, which waits for the writer
	return release
}

// waitFor yields until cond holds, failing t after a few seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s after 5s", what)
		}
		runtime.Gosched()
	}
}

// waitQueued waits until n appends are counted as handed to the writer
// (some may still be blocked on a full queue).
func waitQueued(t *testing.T, j *Journal, n int64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d queued appends", n), func() bool { return j.queued.Load() == n })
}

func pingEvents(n int) []events.Event {
	evs := make([]events.Event, n)
	for i := range evs {
		evs[i] = ev("w", i)
	}
	return evs
}

// TestWriterBatches: appends queued while a commit runs share the next
// commit, up to MaxBatch events (the default, 1024, when MaxBatch is 0);
// a single append larger than MaxBatch commits whole, alone.
func TestWriterBatches(t *testing.T) {
	for _, c := range []struct {
		maxBatch int
		sizes    []int // events per Submit, in order
		commits  uint64
	}{
		// The first append fills a batch; the next three fill the
		// second, the last is alone.
		{3, []int{5, 1, 1, 1, 1}, 3},
		{3, []int{3, 2, 1, 2}, 3},
		{0, []int{DefaultMaxBatch, 1, 1, 1, 1, 1}, 2},
	} {
		j := openWriter(t, Options{MaxBatch: c.maxBatch})
		sid := events.NewID()
		release := holdWriter(t, j) // the writer takes the first append, then waits
		pend := make(chan []*Pending, 1)
		go func() { // Submit blocks while the queue is full
			var ps []*Pending
			for _, n := range c.sizes {
				ps = append(ps, j.Submit(sid, Any, pingEvents(n)))
			}
			pend <- ps
		}()
		waitQueued(t, j, int64(len(c.sizes)))
		_, before := WriteStats(j)
		release()
		var last uint64
		for _, p := range <-pend {
			res, err := p.Wait(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			last = res.LastSeq
		}
		_, after := WriteStats(j)
		if got := after - before; got != c.commits {
			t.Errorf("MaxBatch %d, appends of %v events queued together: %d commits, want %d", c.maxBatch, c.sizes, got, c.commits)
		}
		if want := uint64(sum(c.sizes)); last != want {
			t.Errorf("MaxBatch %d: the last append ends at seq %d, want %d", c.maxBatch, last, want)
		}
	}
}

func sum(ns []int) int {
	s := 0
	for _, n := range ns {
		s += n
	}
	return s
}

// TestAppendCancelledWhileQueued: an Append whose context ends while it
// waits for room in the writer's queue returns the context's error,
// appends nothing, and leaves no trace in the queue's count: the next
// lone Append commits in its caller's goroutine again.
func TestAppendCancelledWhileQueued(t *testing.T) {
	j := openWriter(t, Options{MaxBatch: 1})
	sid := events.NewID()
	release := holdWriter(t, j)
	first := j.Submit(sid, Any, pingEvents(1)) // taken by the writer, which waits
	waitFor(t, "the writer to take the first append", func() bool { return len(j.reqs) == 0 })
	second := j.Submit(sid, Any, pingEvents(1)) // fills the queue
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() {
		_, err := j.Append(ctx, sid, Any, pingEvents(1))
		done <- err
	}()
	waitQueued(t, j, 3)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Append cancelled while waiting for the queue: %v, want context.Canceled", err)
	}
	release()
	for _, p := range []*Pending{first, second} {
		if _, err := p.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if n := j.queued.Load(); n != 0 {
		t.Fatalf("%d appends counted as queued after all were committed or cancelled", n)
	}
	if info, err := j.Head(t.Context(), sid); err != nil || info.LastSeq != 2 {
		t.Fatalf("Head = %+v, %v; want the two submitted events only", info, err)
	}
	// A lone append commits in its caller's goroutine. The writer
	// acknowledges the second append before it lets go of the
	// transaction lock, so wait for it to let go first.
	j.txMu.Lock()
	j.txMu.Unlock() //nolint:staticcheck // an empty critical section: waiting for the writer
	r, err := newRequest(sid, Any, pingEvents(1))
	if err != nil {
		t.Fatal(err)
	}
	if !j.direct(r) {
		t.Fatal("a lone append after the cancelled one does not commit directly")
	}
	if _, err := r.p.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestRetryOfUndecodableRecord: a retry whose original record passes its
// CRC but does not decode fails with a *CorruptError naming the record.
func TestRetryOfUndecodableRecord(t *testing.T) {
	j := openWriter(t, Options{})
	sid := events.NewID()
	first, err := j.Append(t.Context(), sid, NoStream, pingEvents(3))
	if err != nil {
		t.Fatal(err)
	}
	err = j.db.Update(func(tx *bolt.Tx) error { // record 2 loses its payload's last byte
		logB := tx.Bucket(bucketLog)
		var k [8]byte
		rec := bytes.Clone(logB.Get(itob(&k, 2)))
		rec = rec[:len(rec)-1]
		binary.BigEndian.PutUint32(rec, crc32.Checksum(rec[4:], crc32.MakeTable(crc32.Castagnoli)))
		return logB.Put(itob(&k, 2), rec)
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = j.Append(t.Context(), sid, Any, first.Events)
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Session != sid || ce.Seq != 2 || ce.Reason != "undecodable record" {
		t.Fatalf("retry of an append whose second record does not decode: %v, want a *CorruptError at seq 2", err)
	}
}

// TestWriterLingers: after a commit that carried several appends, the
// writer waits, up to Linger, for as many to gather, or for MaxBatch
// events: an append that comes alone then waits for company, and
// commits with it as soon as either count is reached.
func TestWriterLingers(t *testing.T) {
	for _, c := range []struct {
		maxBatch, shared, company int // company: events of the second append
	}{
		{100, 2, 1}, // two appends, as many as the last commit
		{3, 3, 2},   // three events, MaxBatch
	} {
		j := openWriter(t, Options{MaxBatch: c.maxBatch, Linger: 5 * time.Second})
		sid := events.NewID()
		release := holdWriter(t, j)
		pend := []*Pending{j.Submit(sid, Any, pingEvents(c.maxBatch))} // the writer's first batch, alone
		for range c.shared {
			pend = append(pend, j.Submit(sid, Any, pingEvents(1))) // the next commit
		}
		waitQueued(t, j, int64(len(pend)))
		release()
		for _, p := range pend {
			if _, err := p.Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		_, before := WriteStats(j)
		alone := j.Submit(sid, Any, pingEvents(1))
		select {
		case <-alone.Done():
			t.Fatalf("MaxBatch %d: an append alone after a commit of %d committed without waiting for another", c.maxBatch, c.shared)
		case <-time.After(50 * time.Millisecond): // the writer waits up to 5 s
		}
		company := j.Submit(sid, Any, pingEvents(c.company))
		ctx, cancel := context.WithTimeout(t.Context(), time.Second) // not for a third append
		for _, p := range []*Pending{alone, company} {
			if _, err := p.Wait(ctx); err != nil {
				t.Fatalf("MaxBatch %d: %v", c.maxBatch, err)
			}
		}
		cancel()
		if _, after := WriteStats(j); after-before != 1 {
			t.Errorf("MaxBatch %d: the two appends took %d commits, want 1", c.maxBatch, after-before)
		}
	}
}
