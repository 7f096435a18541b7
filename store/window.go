package store

import (
	"hash/maphash"

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
//
// It is resident for as long as the journal is open, in the process of
// whoever embeds it, so it is compact: the committed IDs in a ring, the
// current transaction's in pending, and an open-addressing index (linear
// probing, at most three quarters full) whose slots hold a 32-bit hash of
// the ID and a reference into those two. A Go map of the same IDs took
// about 850 KB beside the ring's 384; the index takes 256 KB. Resident
// memory matters on the call path of the process: go-sdk leaves hundreds
// of KB of garbage per call, and every byte held here is a byte less of
// headroom under the GC's 4 MB minimum goal, so the GC runs more often.
type recentIDs struct {
	size    int
	ring    []idAt // committed IDs, oldest at next once full
	next    int
	pending []idAt // added by the transaction being built
	seed    maphash.Seed
	slots   []uint64 // 0: empty; else hash<<32 | ref (r+1 for ring[r], size+p+1 for pending[p])
	used    int      // slots in use
}

type idAt struct {
	id   uuid.UUID
	gpos uint64
}

func newRecentIDs(size int) *recentIDs {
	t := 8 // a power of two with size entries at most half of it
	for t < 2*size {
		t *= 2
	}
	return &recentIDs{size: size, seed: maphash.MakeSeed(), slots: make([]uint64, t)}
}

// hash returns id's 32-bit hash. Its low bits are id's home slot.
func (w *recentIDs) hash(id uuid.UUID) uint32 { return uint32(maphash.Comparable(w.seed, id)) }

// at returns the entry that slot s refers to.
func (w *recentIDs) at(s uint64) *idAt {
	i := int(uint32(s)) - 1
	if i < w.size {
		return &w.ring[i]
	}
	return &w.pending[i-w.size]
}

// find returns the slot holding id, or -1.
func (w *recentIDs) find(id uuid.UUID) int {
	h := w.hash(id)
	mask := len(w.slots) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		s := w.slots[i]
		if s == 0 {
			return -1
		}
		if uint32(s>>32) == h && w.at(s).id == id {
			return i
		}
	}
}

// lookup returns the global position of the event with id, if it is
// among the recent ones (or added by the current transaction).
func (w *recentIDs) lookup(id uuid.UUID) (uint64, bool) {
	if i := w.find(id); i >= 0 {
		return w.at(w.slots[i]).gpos, true
	}
	return 0, false
}

// set points id's slot at ref: the slot it has, or a new one. A later
// add of an ID takes over its slot, as assigning a map key would.
func (w *recentIDs) set(id uuid.UUID, ref uint32) {
	if i := w.find(id); i >= 0 {
		w.slots[i] = w.slots[i]&^0xffffffff | uint64(ref)
		return
	}
	if 4*(w.used+1) > 3*len(w.slots) {
		w.grow()
	}
	w.insert(uint64(w.hash(id))<<32 | uint64(ref))
	w.used++
}

// insert puts s in the first free slot from its home.
func (w *recentIDs) insert(s uint64) {
	mask := len(w.slots) - 1
	i := int(s>>32) & mask
	for w.slots[i] != 0 {
		i = (i + 1) & mask
	}
	w.slots[i] = s
}

// grow doubles the index: a transaction added so many IDs that the window
// and they no longer fit.
func (w *recentIDs) grow() {
	old := w.slots
	w.slots = make([]uint64, 2*len(old))
	for _, s := range old {
		if s != 0 {
			w.insert(s)
		}
	}
}

// unset empties slot i, moving later entries of its probe run back so
// that each stays reachable from its home slot.
func (w *recentIDs) unset(i int) {
	mask := len(w.slots) - 1
	for j := (i + 1) & mask; w.slots[j] != 0; j = (j + 1) & mask {
		// The entry at j may move to i unless its home is in (i, j].
		h := int(w.slots[j]>>32) & mask
		if j > i && (h <= i || h > j) || j < i && h <= i && h > j {
			w.slots[i] = w.slots[j]
			i = j
		}
	}
	w.slots[i] = 0
	w.used--
}

// unsetRef removes id's slot if it still refers to ref.
func (w *recentIDs) unsetRef(id uuid.UUID, ref uint32) {
	if i := w.find(id); i >= 0 && uint32(w.slots[i]) == ref {
		w.unset(i)
	}
}

// add records id at gpos for the current transaction.
func (w *recentIDs) add(id uuid.UUID, gpos uint64) {
	w.pending = append(w.pending, idAt{id, gpos})
	w.set(id, uint32(w.size+len(w.pending)))
}

// commit keeps the current transaction's IDs, forgetting the oldest ones
// beyond the window.
func (w *recentIDs) commit() {
	for k, p := range w.pending {
		var r int
		if len(w.ring) < w.size {
			r = len(w.ring)
			w.ring = append(w.ring, p)
		} else {
			r = w.next
			w.unsetRef(w.ring[r].id, uint32(r+1)) // before ring[r] is overwritten: find reads it
			w.ring[r] = p
			w.next = (w.next + 1) % w.size
		}
		// Re-point p's slot from pending to the ring, unless a later add
		// of the same ID took it.
		if i := w.find(p.id); i >= 0 && uint32(w.slots[i]) == uint32(w.size+k+1) {
			w.slots[i] = w.slots[i]&^0xffffffff | uint64(r+1)
		}
	}
	w.pending = w.pending[:0]
}

// abort forgets the current transaction's IDs: it did not commit.
func (w *recentIDs) abort() {
	for k := len(w.pending) - 1; k >= 0; k-- {
		w.unsetRef(w.pending[k].id, uint32(w.size+k+1))
	}
	w.pending = w.pending[:0]
}

// reset forgets every ID.
func (w *recentIDs) reset() {
	clear(w.slots)
	w.used = 0
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
	from := uint64(1)
	if last := logB.Sequence(); last > uint64(w.size) {
		from = last - uint64(w.size) + 1
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
