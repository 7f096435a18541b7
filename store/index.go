package store

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"
)

// A session's index says where each of its events is in log/. It is a list
// of runs, each a stretch of consecutive seqs stored at consecutive global
// positions: one run for a session that had the journal to itself, one per
// append when sessions interleave. The runs are cut into segments: sealed
// segments in index/<session ‖ first seq>, written once, and the open
// segment in the session's head, rewritten with it on every append. A
// segment is sealed when its runs no longer fit in the head (runsCap
// bytes), so an append writes the head and, now and then, one segment:
// the pages a commit writes do not grow with the number of sessions it
// touches, beyond the leaves of sessions/ that hold their heads.

// run is count events at global positions gpos, gpos+1, …
type run struct{ gpos, count uint64 }

// appendRuns appends the encoding of runs to dst: per run, the gap to the
// position after the previous run's last one (the first run's gpos itself)
// and the count, as uvarints.
func appendRuns(dst []byte, runs []run) []byte {
	next := uint64(0)
	for _, r := range runs {
		dst = binary.AppendUvarint(dst, r.gpos-next)
		dst = binary.AppendUvarint(dst, r.count)
		next = r.gpos + r.count
	}
	return dst
}

// runsLen is len(appendRuns(nil, runs)).
func runsLen(runs []run) int {
	n, next := 0, uint64(0)
	for _, r := range runs {
		n += uvarintLen(r.gpos-next) + uvarintLen(r.count)
		next = r.gpos + r.count
	}
	return n
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// parseRuns decodes what appendRuns wrote, appending to dst. ok is false
// for anything else, including runs that are empty, touch, overlap or go
// backwards (appendRuns merges touching runs).
func parseRuns(b []byte, dst []run) ([]run, bool) {
	next := uint64(0)
	for len(b) > 0 {
		// Uvarint returns 0 for a varint that is cut short or too long,
		// and 0 is never a gap or a count: that check covers both.
		gap, n := binary.Uvarint(b)
		if gap == 0 {
			return dst, false
		}
		count, m := binary.Uvarint(b[n:])
		if count == 0 || next+gap < next || next+gap+count < next+gap {
			return dst, false
		}
		dst = append(dst, run{next + gap, count})
		next += gap + count
		b = b[n+m:]
	}
	return dst, true
}

// runsEvents is the number of events runs cover.
func runsEvents(runs []run) uint64 {
	var n uint64
	for _, r := range runs {
		n += r.count
	}
	return n
}

// addRun appends the event at gpos to runs, extending the last run when
// gpos follows it.
func addRun(runs []run, gpos uint64) []run {
	if n := len(runs); n > 0 && runs[n-1].gpos+runs[n-1].count == gpos {
		runs[n-1].count++
		return runs
	}
	return append(runs, run{gpos, 1})
}

// span is count events of a session from seq on, at gpos on.
type span struct{ seq, gpos, count uint64 }

// spans returns where the session's events from seq on are, as spans in
// seq order, covering at most limit events, reading sealed segments from
// index/ (c is a cursor on it, in a read transaction that may use m) and
// the open segment from h. It returns a *CorruptError when the segments
// do not join up.
func spans(m mapped, c *bolt.Cursor, h *head, seq, limit uint64, dst []span) ([]span, error) {
	sid := h.info.Session
	if seq > h.info.LastSeq {
		return dst, nil
	}
	left := limit
	emit := func(first uint64, runs []run) {
		s := first
		for _, r := range runs {
			if left == 0 {
				return
			}
			if end := s + r.count; end > seq {
				skip := max(seq, s) - s // the run's events before seq
				n := min(r.count-skip, left)
				dst = append(dst, span{s + skip, r.gpos + skip, n})
				left -= n
				seq = s + skip + n
			}
			s += r.count
		}
	}
	if seq < h.openSeq {
		var kb [indexKeyLen]byte
		k, v := c.Seek(indexKey(&kb, sid, seq))
		if ksid, kseq, ok := parseIndexKey(k); !ok || ksid != sid || kseq != seq {
			k, v = c.Prev()
		}
		var runs []run
		first, end := true, uint64(0)
		for ; left > 0 && seq < h.openSeq; k, v = c.Next() {
			if !m.holds(k) || !m.holds(v) {
				return dst, &CorruptError{Session: sid, Seq: seq, Reason: "an index entry points outside the file (damaged leaf page)"}
			}
			ksid, kseq, ok := parseIndexKey(k)
			if !ok || ksid != sid {
				return dst, &CorruptError{Session: sid, Seq: seq, Reason: "index has no segment for the seq"}
			}
			runs, ok = parseRuns(v, runs[:0])
			n := runsEvents(runs)
			if !ok || n == 0 {
				return dst, &CorruptError{Session: sid, Seq: kseq, Reason: "undecodable index segment"}
			}
			if first && (kseq > seq || kseq+n <= seq) {
				return dst, &CorruptError{Session: sid, Seq: seq, Reason: "index has no segment for the seq"}
			}
			if !first && kseq != end {
				return dst, &CorruptError{Session: sid, Seq: end, Reason: fmt.Sprintf("index segments do not join: next is at seq %d", kseq)}
			}
			if kseq+n > h.openSeq {
				return dst, &CorruptError{Session: sid, Seq: kseq, Reason: "index segment overlaps the open segment"}
			}
			first, end = false, kseq+n
			emit(kseq, runs)
		}
	}
	emit(h.openSeq, h.runs) // nothing more once limit events are emitted
	return dst, nil
}

// loadHead reads a session's head from sessions/ into h; ok is false when
// the session has none. A head that does not decode is a *CorruptError.
func loadHead(sessions *bolt.Bucket, sid uuid.UUID, h *head) (bool, error) {
	v := sessions.Get(sid[:])
	if v == nil {
		return false, nil
	}
	if !parseHead(sid, v, h) {
		return false, &CorruptError{Session: sid, Reason: "undecodable head"}
	}
	return true, nil
}

// locate finds which session's event is stored at gpos, through the heads
// and indexes (not the record, which may be what is damaged), in a read
// transaction. It walks every session whose gpos range holds gpos, so it
// is for error reports.
func locate(tx *bolt.Tx, gpos uint64) (uuid.UUID, uint64, bool) {
	sessions, index := tx.Bucket(bucketSessions), tx.Bucket(bucketIndex)
	if sessions == nil || index == nil {
		return uuid.Nil, 0, false
	}
	m := mappedOf(tx)
	c := sessions.Cursor()
	var h head
	var buf []span
	var prev []byte
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if !m.holds(k) || !ascending(&prev, k) {
			break // damaged pages: give up on naming the session
		}
		if !m.holds(v) || len(k) != 16 || !parseHead(uuid.UUID(k), v, &h) || gpos < h.info.FirstGPos || gpos > h.info.LastGPos {
			continue
		}
		ic := index.Cursor()
		for seq := uint64(1); seq <= h.info.LastSeq; {
			var err error
			if buf, err = spans(m, ic, &h, seq, 4096, buf[:0]); err != nil || len(buf) == 0 {
				break
			}
			for _, s := range buf {
				if gpos >= s.gpos && gpos < s.gpos+s.count {
					return h.info.Session, s.seq + gpos - s.gpos, true
				}
				seq = s.seq + s.count
			}
		}
	}
	return uuid.Nil, 0, false
}

// sameRuns reports whether two run lists describe the same positions,
// whatever the segment boundaries that cut them.
func sameRuns(a, b []run) bool {
	a, b = mergeRuns(append([]run(nil), a...)), mergeRuns(append([]run(nil), b...))
	return bytes.Equal(appendRuns(nil, a), appendRuns(nil, b))
}

// mergeRuns joins touching runs, in place.
func mergeRuns(runs []run) []run {
	out := runs[:0]
	for _, r := range runs {
		if n := len(out); n > 0 && out[n-1].gpos+out[n-1].count == r.gpos {
			out[n-1].count += r.count
			continue
		}
		out = append(out, r)
	}
	return out
}
