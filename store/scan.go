package store

import (
	"context"
	"runtime"
	"sync"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
)

// chunk is up to readChunk records copied out of the journal, then decoded.
type chunk struct {
	pos  []recPos
	recs [][]byte
	data []byte // backing store of copied records (see copyRec)
	ends []int  // end offset in data of each copied record
	evs  []events.Event
	err  error // the first decode error, else fillErr; evs holds the events before it
	done chan struct{}

	// fillErr is the error that stopped the fill, after the records
	// copied before it.
	fillErr error
}

// recPos is where a record was found: its gpos and, when read through a
// session's index, its session and seq (else zero: the record says).
type recPos struct {
	sid       uuid.UUID
	seq, gpos uint64
}

func (c *chunk) reset() {
	c.pos, c.recs, c.data, c.ends, c.evs, c.err, c.fillErr = c.pos[:0], c.recs[:0], c.data[:0], c.ends[:0], c.evs[:0], nil, nil
	c.done = make(chan struct{})
}

// copyRec appends a copy of rec, found at p, for a backend whose records
// are valid only inside a transaction. Call seal after the last one.
func (c *chunk) copyRec(p recPos, rec []byte) {
	c.pos = append(c.pos, p)
	c.data = append(c.data, rec...)
	c.ends = append(c.ends, len(c.data))
}

// seal points recs at the copies made by copyRec.
func (c *chunk) seal() {
	off := 0
	for _, end := range c.ends {
		c.recs = append(c.recs, c.data[off:end:end])
		off = end
	}
}

// addRec appends rec, found at p, for a backend whose records never change.
func (c *chunk) addRec(p recPos, rec []byte) {
	c.pos = append(c.pos, p)
	c.recs = append(c.recs, rec)
}

// fillFunc reads the records from position next on (a gpos or a seq) into
// c, at most readChunk of them, and returns the position after the last.
type fillFunc func(ctx context.Context, c *chunk, next uint64) (uint64, error)

// decode decodes c's records, stopping at the first bad one. A chunk
// whose fill failed ends with the fill's error, unless a record copied
// before it was bad: the first problem in read order is reported.
func (c *chunk) decode(dec *events.Decoder) {
	for i, rec := range c.recs {
		p := c.pos[i]
		e, err := decode(dec, p.sid, p.seq, p.gpos, rec)
		if err != nil {
			c.err = err
			return
		}
		c.evs = append(c.evs, e)
	}
	c.err = c.fillErr
}

// deliver calls fn on c's events and returns c's error, if any, after
// the events before it. *gpos is advanced past every delivered event.
func (c *chunk) deliver(fn func(events.Event) error, gpos *uint64) error {
	for i := range c.evs {
		e := c.evs[i]
		*gpos = e.GPos + 1
		if err := fn(e); err != nil {
			return err
		}
	}
	return c.err
}

// scan reads records with fill from position next on and calls fn on
// each decoded event, in order, in the caller's goroutine. The first
// chunk is read and decoded right here; if it was full, the rest is read
// by one goroutine and decoded by GOMAXPROCS goroutines, all of which end
// before scan returns. It returns the global position after the last
// event delivered (next if none was): a read of the log (Follow) goes on
// from there; a read of a session, whose fill positions are seqs, has no
// use for it.
func scan(ctx context.Context, next uint64, fill fillFunc, fn func(events.Event) error) (uint64, error) {
	c := getChunk()
	defer putChunk(c)
	c.reset()
	var after uint64
	after, c.fillErr = fill(ctx, c, next)
	dec := decoders.Get().(*events.Decoder)
	c.decode(dec)
	decoders.Put(dec)
	if err := c.deliver(fn, &next); err != nil {
		return next, err
	}
	if len(c.recs) < readChunk {
		return next, nil
	}
	return scanParallel(ctx, after, fill, fn)
}

// Chunks and decoders are pooled across reads: a chunk's buffers grow to
// a few hundred kilobytes, and a decoder keeps its table of interned
// strings. Events never alias a chunk (events.Decoder copies), so a chunk
// is reusable once its events are delivered.
var (
	chunks   = sync.Pool{New: func() any { return new(chunk) }}
	decoders = sync.Pool{New: func() any { return events.NewDecoder() }}
)

// maxPooledChunk is the largest chunk buffer kept for reuse.
const maxPooledChunk = 4 << 20

func getChunk() *chunk { return chunks.Get().(*chunk) }

func putChunk(c *chunk) {
	if cap(c.data) > maxPooledChunk {
		return
	}
	clear(c.evs) // drop the payloads
	clear(c.recs)
	c.evs, c.recs, c.err = c.evs[:0], c.recs[:0], nil
	chunks.Put(c)
}

func scanParallel(ctx context.Context, next uint64, fill fillFunc, fn func(events.Event) error) (uint64, error) {
	workers := runtime.GOMAXPROCS(0)
	inflight := workers + 1
	all := make([]*chunk, inflight+2)
	for i := range all {
		all[i] = getChunk()
	}
	defer func() { // runs last, once no goroutine below holds a chunk
		for _, c := range all {
			putChunk(c)
		}
	}()
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait() // runs after cancel: every goroutine below ends
	defer cancel()

	order := make(chan *chunk, inflight) // chunks in read order, to the caller
	work := make(chan *chunk, inflight)  // the same chunks, to the decoders
	free := make(chan *chunk, len(all))
	for _, c := range all {
		free <- c
	}
	wg.Go(func() { // the reader: fills chunks until the end, an error or cancel
		defer close(order)
		defer close(work)
		pos := next
		for {
			var c *chunk
			select {
			case c = <-free:
			case <-ctx.Done():
				return
			}
			c.reset()
			pos, c.fillErr = fill(ctx, c, pos)
			select {
			case order <- c:
			case <-ctx.Done():
				return
			}
			select {
			case work <- c:
			case <-ctx.Done():
				return
			}
			if c.fillErr != nil || len(c.recs) < readChunk {
				return
			}
		}
	})
	for range workers {
		wg.Go(func() { // a decoder: ends when the reader closes work
			dec := decoders.Get().(*events.Decoder)
			defer decoders.Put(dec)
			for c := range work {
				c.decode(dec)
				close(c.done)
			}
		})
	}
	delivered := next
	for c := range order {
		select {
		case <-c.done:
		case <-ctx.Done():
		}
		if err := ctx.Err(); err != nil {
			return delivered, err
		}
		if err := c.deliver(fn, &delivered); err != nil {
			return delivered, err
		}
		if len(c.recs) < readChunk {
			return delivered, nil
		}
		free <- c
	}
	return delivered, ctx.Err()
}
