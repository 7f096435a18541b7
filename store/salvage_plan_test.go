package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/mcpledger/mcpledger/events"
)

// planFile writes recs (records of events) into a file back to back and
// returns it open, with each record's place.
func planFile(t *testing.T, recs [][]byte) (*os.File, []found) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "recs")
	var data []byte
	var out []found
	for _, r := range recs {
		out = append(out, found{off: int64(len(data)), n: len(r)})
		data = append(data, r...)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, out
}

// chainOf is the hash chain of recs.
func chainOf(recs [][]byte) [32]byte {
	c := newChecker()
	for _, r := range recs {
		c.sum.Reset()
		c.sum.Write(c.info.Head[:])
		c.sum.Write(r)
		c.sum.Sum(c.info.Head[:0])
	}
	return c.info.Head
}

// TestSalvagePlan: which records plan keeps of each session, and what it
// reports lost, from records found (their bytes in a file) and heads.
func TestSalvagePlan(t *testing.T) {
	recs := make([][]byte, 6)
	for i := range recs {
		recs[i] = []byte{byte(i), 1, 2, 3, 4, 5}
	}
	f, at := planFile(t, recs)
	sid := uuid.UUID{1}
	rec := func(i int, seq, gpos uint64) found {
		r := at[i]
		r.sid, r.seq, r.gpos = sid, seq, gpos
		return r
	}
	full := SessionInfo{Session: sid, LastSeq: 4, Head: chainOf(recs[:4])}
	for _, c := range []struct {
		name      string
		recs      []found
		head      *SessionInfo
		kept      uint64
		firstLost uint64
		stranded  int
		reason    string
	}{
		{"whole", []found{rec(0, 1, 1), rec(1, 2, 2), rec(2, 3, 5), rec(3, 4, 9)}, &full, 4, 0, 0, ""},
		{"copies of a record", []found{rec(0, 1, 1), rec(0, 1, 1), rec(1, 2, 2), rec(2, 3, 5), rec(2, 3, 5), rec(3, 4, 9)}, &full, 4, 0, 0, ""},
		{"a gap", []found{rec(0, 1, 1), rec(1, 2, 2), rec(3, 4, 9)}, &full, 2, 3, 1, "seq 3 is not in the file"},
		{"stranded copies", []found{rec(0, 1, 1), rec(2, 3, 5), rec(2, 3, 5), rec(3, 4, 9)}, &full, 1, 2, 2, "seq 2 is not in the file"},
		{"no seq 1", []found{rec(1, 2, 2), rec(2, 3, 5)}, &full, 0, 1, 2, "seq 1 is not in the file"},
		{"the end missing", []found{rec(0, 1, 1), rec(1, 2, 2)}, &full, 2, 3, 0, "seq 3 is not in the file"},
		{"out of order", []found{rec(0, 1, 4), rec(1, 2, 2), rec(2, 3, 5)}, &full, 1, 2, 1, "seq 2 is stored at position 2, before seq 1's 4"},
		{"the same position twice", []found{rec(0, 1, 4), rec(1, 2, 4)}, &full, 1, 2, 0, "seq 2 is stored at position 4"},
		{"undecodable", []found{rec(0, 1, 1), func() found { r := rec(1, 2, 2); r.bad = "does not decode: x"; return r }(), rec(2, 3, 5)}, &full, 1, 2, 1, "seq 2 does not decode: x"},
		{"unreadable", []found{rec(0, 1, 1), func() found { r := rec(1, 2, 2); r.off = 1 << 40; return r }()}, &full, 1, 2, 0, "seq 2 cannot be read again"},
		{"another chain", []found{rec(0, 1, 1), rec(1, 2, 2), rec(2, 3, 5), rec(4, 4, 9)}, &full, 4, 0, 0, "hash chain does not match its head"},
		{"no head", []found{rec(0, 1, 1), rec(1, 2, 2)}, nil, 2, 0, 0, "its head is lost"},
		{"no records", nil, &full, 0, 1, 0, "none of its records is left in the file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := &scanResult{heads: map[uuid.UUID]SessionInfo{}, recs: c.recs}
			if c.head != nil {
				res.heads[sid] = *c.head
			}
			var rep SalvageReport
			keep := plan(f, res, &rep)
			if len(rep.PerSession) != 1 {
				t.Fatalf("%d sessions reported", len(rep.PerSession))
			}
			s := rep.PerSession[0]
			if s.Session != sid || s.Kept != c.kept || s.FirstLost != c.firstLost || s.Stranded != c.stranded || !strings.Contains(s.Reason, c.reason) || (c.reason == "") != (s.Reason == "") {
				t.Errorf("got %+v\nwant kept %d, first lost %d, %d stranded, %q", s, c.kept, c.firstLost, c.stranded, c.reason)
			}
			if c.head != nil && s.HeadSeq != 4 || c.head == nil && s.HeadSeq != 0 {
				t.Errorf("head seq %d", s.HeadSeq)
			}
			if uint64(len(keep)) != c.kept || rep.Events != c.kept {
				t.Errorf("keeps %d records, reports %d, want %d", len(keep), rep.Events, c.kept)
			}
			for i, r := range keep {
				if r.seq != uint64(i+1) {
					t.Errorf("keeps seq %d as the %d-th", r.seq, i+1)
				}
			}
			gone, lost, sessions := 0, 0, 1
			if c.kept == 0 {
				gone, sessions = 1, 0
			}
			if c.firstLost != 0 || c.head == nil {
				lost = 1
			}
			if rep.Gone != gone || rep.Lost != lost || rep.Sessions != sessions {
				t.Errorf("gone %d, lost %d, sessions %d; want %d, %d, %d", rep.Gone, rep.Lost, rep.Sessions, gone, lost, sessions)
			}
		})
	}
}

// TestSalvagePlanOrder: plan returns the records of every session in
// their old log order, and reports the sessions in id order.
func TestSalvagePlanOrder(t *testing.T) {
	f, at := planFile(t, [][]byte{{1, 1, 1, 1, 1}, {2, 2, 2, 2, 2}, {3, 3, 3, 3, 3}})
	a, b := uuid.UUID{9}, uuid.UUID{3}
	mk := func(i int, sid uuid.UUID, seq, gpos uint64) found {
		r := at[i]
		r.sid, r.seq, r.gpos = sid, seq, gpos
		return r
	}
	res := &scanResult{heads: map[uuid.UUID]SessionInfo{}, recs: []found{mk(2, a, 2, 3), mk(1, b, 1, 2), mk(0, a, 1, 1)}}
	var rep SalvageReport
	keep := plan(f, res, &rep)
	if len(keep) != 3 || keep[0].gpos != 1 || keep[1].gpos != 2 || keep[2].gpos != 3 {
		t.Errorf("keep %+v, want log order", keep)
	}
	if len(rep.PerSession) != 2 || rep.PerSession[0].Session != b || rep.PerSession[1].Session != a {
		t.Errorf("sessions reported %+v, want in id order", rep.PerSession)
	}
}

// reseal fixes rec's CRC after a change.
func reseal(rec []byte) []byte {
	binary.BigEndian.PutUint32(rec, crc32.Checksum(rec[4:], castagnoli))
	return rec
}

// TestSalvageRewrittenRecords: records replaced in place, with a valid
// CRC: one that still decodes but is not the record the head's chain
// covers (kept, reported), and one that no longer decodes (the session
// ends before it).
func TestSalvageRewrittenRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	j, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	a, b := events.NewID(), events.NewID()
	for _, sid := range []uuid.UUID{a, b} {
		evs := make([]events.Event, 10)
		for i := range evs {
			evs[i] = ev("s", i)
		}
		if _, err := j.Append(t.Context(), sid, NoStream, evs); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		log := tx.Bucket(bucketLog)
		var kb [8]byte
		e, err := events.Decode(log.Get(itob(&kb, 5))) // session a, seq 5
		if err != nil {
			return err
		}
		e.Payload.(*events.PingFailed).Attempt = 99
		other, err := events.Encode(&e)
		if err != nil {
			return err
		}
		if err := log.Put(itob(&kb, 5), other); err != nil {
			return err
		}
		rec := bytes.Clone(log.Get(itob(&kb, 14))) // session b, seq 4
		return log.Put(itob(&kb, 14), reseal(rec[:len(rec)-3]))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Salvage(t.Context(), path, path+".out", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[uuid.UUID]SalvagedSession{}
	for _, s := range rep.PerSession {
		got[s.Session] = s
	}
	if s := got[a]; s.Kept != 10 || s.FirstLost != 0 || !strings.Contains(s.Reason, "hash chain does not match its head") {
		t.Errorf("a record replaced by another: %+v", s)
	}
	if s := got[b]; s.Kept != 3 || s.FirstLost != 4 || !strings.Contains(s.Reason, "seq 4 does not decode") || s.Stranded != 6 {
		t.Errorf("a record that no longer decodes: %+v", s)
	}
	if rep.Events != 13 || rep.Verified.Events != 13 {
		t.Errorf("%d events copied, %d verified; want 13", rep.Events, rep.Verified.Events)
	}
}

// TestSalvageScanFallbacks: the scan without a freelist to trust (it
// reads every page, and keeps one copy of each record), without a valid
// meta (it takes the OS page size and reads the whole file), and of a
// journal so small that its buckets are inline in the root page.
func TestSalvageScanFallbacks(t *testing.T) {
	data := structFile(t) // three sessions of 3,000 events
	b := &structBase
	ps := int(b.m.pageSize)
	for _, c := range []struct {
		name   string
		damage func(d []byte)
	}{
		{"the freelist zeroed", func(d []byte) { clear(d[int(b.m.freelist)*ps : int(b.m.freelist+1)*ps]) }},
		{"both metas zeroed", func(d []byte) { clear(d[:2*ps]) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := bytes.Clone(data)
			c.damage(d)
			path := filepath.Join(t.TempDir(), "j.db")
			if err := os.WriteFile(path, d, 0o600); err != nil {
				t.Fatal(err)
			}
			rep, err := Salvage(t.Context(), path, path+".out", nil)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Events != 9000 || rep.Sessions != 3 || rep.Lost != 0 || rep.Verified.Events != 9000 {
				t.Errorf("report %+v", rep)
			}
		})
	}
	path := filepath.Join(t.TempDir(), "small.db")
	j, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(t.Context(), events.NewID(), NoStream, []events.Event{ev("s", 1), ev("s", 2)}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	rep, err := Salvage(t.Context(), path, path+".out", nil)
	if err != nil || rep.Events != 2 || rep.Lost != 0 || rep.Pages == 0 {
		t.Errorf("a journal of two events: %+v, %v", rep, err)
	}
}

func TestNextBatch(t *testing.T) {
	a, b := uuid.UUID{1}, uuid.UUID{2}
	keep := []found{{sid: a}, {sid: a}, {sid: a}, {sid: a}, {sid: a}, {sid: b}, {sid: a}}
	var ends []int
	for i := 0; i < len(keep); i = nextBatch(keep, i, 2) {
		ends = append(ends, nextBatch(keep, i, 2))
	}
	if want := []int{2, 4, 5, 6, 7}; !slices.Equal(ends, want) {
		t.Errorf("batches of at most 2 of one session end at %v, want %v", ends, want)
	}
	if end := nextBatch(keep, 0, 1024); end != 5 {
		t.Errorf("a batch of 1024 ends at %d, want 5 (where the session changes)", end)
	}
}

// TestSalvageDamagedLeaf: a leaf page of the log whose count and element
// lengths are damaged: the scan takes the elements that lie inside the
// page and skips the others, without reading past it.
func TestSalvageDamagedLeaf(t *testing.T) {
	d := structFile(t)
	b := &structBase
	le := binary.LittleEndian
	ps := int(b.m.pageSize)
	mid := b.page(b.mids[1])
	_, leaf := mid.branchElem(1)
	p := d[int(leaf)*ps : int(leaf+1)*ps]
	if le.Uint16(p[8:]) != leafPageFlag || le.Uint16(p[10:]) < 10 {
		t.Fatalf("page %d is not a leaf of 10 or more records", leaf)
	}
	le.PutUint16(p[10:], 0xFFFF)                              // count
	le.PutUint32(p[pageHeader+3*pageElemSize+8:], 1<<30)      // element 3's key size
	le.PutUint32(p[pageHeader+5*pageElemSize+12:], 1<<30)     // element 5's value size
	le.PutUint32(p[pageHeader+7*pageElemSize+4:], uint32(ps)) // element 7's position
	path := filepath.Join(t.TempDir(), "j.db")
	if err := os.WriteFile(path, d, 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := Salvage(t.Context(), path, path+".out", nil)
	if err != nil {
		t.Fatal(err)
	}
	var stranded int
	for _, s := range rep.PerSession {
		stranded += s.Stranded
	}
	// Element 3's record is the first lost: its session (and the others,
	// whose records interleave in the same page) keeps what precedes it.
	if rep.Lost == 0 || stranded == 0 || rep.Events == 0 || rep.Events >= 9000 {
		t.Errorf("report %+v", rep)
	}
}

// TestSalvageScanBounds: the scan reads the pages below the newest meta's
// high-water mark, not a leaf page past it (a commit that never
// completed), and of two valid metas with one transaction id, the first
// (as bbolt does).
func TestSalvageScanBounds(t *testing.T) {
	d := structFile(t)
	b := &structBase
	other := filepath.Join(t.TempDir(), "other.db")
	j, err := Open(other, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	stray := events.NewID()
	evs := make([]events.Event, 200)
	for i := range evs {
		evs[i] = ev("stray", i)
	}
	if _, err := j.Append(t.Context(), stray, NoStream, evs); err != nil {
		t.Fatal(err)
	}
	j.Close()
	db, err := bolt.Open(other, 0o600, &bolt.Options{ReadOnly: true, PreLoadFreelist: true})
	if err != nil {
		t.Fatal(err)
	}
	var page []byte
	_ = db.View(func(tx *bolt.Tx) error {
		for id := 2; page == nil; id++ {
			if p, err := tx.Page(id); err != nil || p == nil {
				return err
			} else if p.Type == "leaf" && p.Count > 10 {
				data, _ := os.ReadFile(other)
				page = bytes.Clone(data[id*int(structBase.m.pageSize) : (id+1)*int(structBase.m.pageSize)])
			}
		}
		return nil
	})
	db.Close()
	if page == nil || uint64(len(d)) != b.m.pgid*uint64(b.m.pageSize) {
		t.Fatal("no leaf page of records to plant, or the base file is not its pages in use")
	}
	binary.LittleEndian.PutUint64(page, b.m.pgid)
	path := filepath.Join(t.TempDir(), "j.db")
	if err := os.WriteFile(path, append(d, page...), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := Salvage(t.Context(), path, path+".out", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.PerSession {
		if s.Session == stray {
			t.Errorf("salvaged %d events of a page past the high-water mark", s.Kept)
		}
	}
	if rep.Events != 9000 {
		t.Errorf("%d events salvaged, want 9000", rep.Events)
	}

	d = structFile(t)
	m0, _ := parseMeta(d)
	copy(d[b.m.pageSize:], metaPage(b.m.pageSize, m0.root, m0.freelist, 2, m0.txid)) // the second meta: same txid, no pages
	path = filepath.Join(t.TempDir(), "j.db")
	if err := os.WriteFile(path, d, 0o600); err != nil {
		t.Fatal(err)
	}
	if rep, err = Salvage(t.Context(), path, path+".out", nil); err != nil || rep.Events == 0 {
		t.Errorf("two metas of one transaction: %d events salvaged (%v), want those of the first meta's pages", rep.Events, err)
	}
}

// TestSalvageDamagedInlineBucket: a journal small enough that its buckets
// are inline in the root page, with one bucket's value cut shorter than
// an inline page: the scan skips it and takes the rest.
func TestSalvageDamagedInlineBucket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "small.db")
	j, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(t.Context(), events.NewID(), NoStream, []events.Event{ev("s", 1), ev("s", 2)}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m0, _ := parseMeta(data)
	m1, _ := parseMeta(data[m0.pageSize:])
	m := m0
	if m1.txid > m0.txid {
		m = m1
	}
	le := binary.LittleEndian
	root := data[m.root*uint64(m.pageSize):][:m.pageSize]
	cut := false
	for i := range int(le.Uint16(root[10:])) {
		at := pageHeader + i*pageElemSize
		pos, ksize := at+int(le.Uint32(root[at+4:])), int(le.Uint32(root[at+8:]))
		if string(root[pos:pos+ksize]) == "index" {
			le.PutUint32(root[at+12:], 20) // value size: a bucket header and 4 bytes
			cut = true
		}
	}
	if !cut {
		t.Fatal("no index bucket in the root page")
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := Salvage(t.Context(), path, path+".out", nil)
	if err != nil || rep.Events != 2 || rep.Lost != 0 {
		t.Errorf("a small journal with a cut inline bucket: %+v, %v", rep, err)
	}
}

// TestSyncFile: syncFile fails for a file that does not exist.
func TestSyncFile(t *testing.T) {
	dir := t.TempDir()
	if err := syncFile(filepath.Join(dir, "none")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("syncFile of a missing file: %v", err)
	}
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syncFile(path); err != nil {
		t.Errorf("syncFile: %v", err)
	}
}
