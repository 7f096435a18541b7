package store

import (
	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/mcpledger/mcpledger/events"
)

// RetryWindow is how many of the journal's latest events a retry is
// recognised among: an append whose event IDs are stored among them is a
// retry (or, if they do not match a whole earlier append of the same
// session, a conflict). The writer keeps their IDs in memory and rebuilds
// the set from the end of log/ when the journal opens; nothing is written
// for it. An event ID older than the window is not looked up.
const RetryWindow = 1 << 14

// recentIDs maps the IDs of the journal's last RetryWindow events to their
// global positions. Only the writer goroutine uses it.
type recentIDs struct {
	size    int
	gpos    map[uuid.UUID]uint64
	ring    []idAt // committed IDs, oldest at next once full
	next    int
	pending []idAt // added by the transaction being built
}

type idAt struct {
	id   uuid.UUID
	gpos uint64
}

func newRecentIDs(size int) *recentIDs {
	return &recentIDs{size: size, gpos: make(map[uuid.UUID]uint64, size)}
}

// lookup returns the global position of the event with id, if it is
// among the recent ones (or added by the current transaction).
func (w *recentIDs) lookup(id uuid.UUID) (uint64, bool) {
	g, ok := w.gpos[id]
	return g, ok
}

// add records id at gpos for the current transaction.
func (w *recentIDs) add(id uuid.UUID, gpos uint64) {
	w.gpos[id] = gpos
	w.pending = append(w.pending, idAt{id, gpos})
}

// commit keeps the current transaction's IDs, forgetting the oldest ones
// beyond the window.
func (w *recentIDs) commit() {
	for _, p := range w.pending {
		if len(w.ring) < w.size {
			w.ring = append(w.ring, p)
			continue
		}
		old := w.ring[w.next]
		if w.gpos[old.id] == old.gpos {
			delete(w.gpos, old.id)
		}
		w.ring[w.next] = p
		w.next = (w.next + 1) % w.size
	}
	w.pending = w.pending[:0]
}

// reset forgets every ID.
func (w *recentIDs) reset() {
	clear(w.gpos)
	w.ring, w.next, w.pending = w.ring[:0], 0, w.pending[:0]
}

// load fills w with the IDs of the last w.size records of log/, in a read
// transaction. Records that fail their CRC are skipped (reads and Verify
// report them) and counted in skipped. It stops at the first entry that
// is not the record expected next, in a log without gaps, and returns its
// position in damaged (else 0): an entry that a damaged leaf page places
// outside the file, or marks as a nested bucket (whose value bbolt does
// not return, so its length goes unchecked), a gap, or keys out of order
// (damaged pages can send a cursor round in circles). The end of the log
// is where appends write, and bbolt rewriting a damaged page there would
// copy, and allocate, by its damaged lengths.
func (w *recentIDs) load(tx *bolt.Tx) (skipped int, damaged uint64) {
	m := mappedOf(tx)
	logB := tx.Bucket(bucketLog)
	from := baseOf(tx) + 1
	if last := logB.Sequence(); last > uint64(w.size) {
		from = max(from, last-uint64(w.size)+1)
	}
	dec := events.NewDecoder()
	c := logB.Cursor()
	var kb [8]byte
	at := from // the position of the record expected next
	for k, v := c.Seek(itob(&kb, from)); k != nil; k, v = c.Next() {
		var gpos uint64
		ok := m.holds(k) && m.holds(v) && v != nil
		if ok {
			gpos, ok = btoi(k)
		}
		if !ok || gpos != at {
			damaged = at
			break
		}
		at++
		e, err := dec.DecodeHeader(v)
		if err != nil {
			skipped++
			continue
		}
		w.add(e.ID, gpos)
	}
	w.commit()
	return skipped, damaged
}
