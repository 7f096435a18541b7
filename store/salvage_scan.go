package store

import (
	"cmp"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"slices"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
)

// The raw scan behind [Salvage]. It does not use bbolt: a damaged page
// anywhere in a bbolt tree hides every page under it, and a truncated
// file is not mapped at all. Instead it reads the file's pages in order
// and takes from every leaf page (and every inline bucket page inside
// one) the elements that still read: records (an 8-byte key whose value
// decodes with the events codec, CRC included, and names that key as
// its position), session heads (a 16-byte key whose value parses as a
// head), and meta/base and meta/base_state. Garbage fails the CRC; a
// leaf element that points outside its page is skipped, not followed.
//
// Pages the freelist lists hold stale copies of pages (or pages of a
// commit that failed): when the freelist reads, they are skipped; when
// it does not, every page is read, and a record found twice is kept once.

// found is one record the scan found: where its bytes are in the file,
// and its envelope.
type found struct {
	sid  uuid.UUID
	seq  uint64
	gpos uint64
	off  int64 // the record's bytes: [off, off+n) of the file
	n    int
	bad  string // why the record cannot be copied ("" if it can)
}

// scanResult is what scanPages found.
type scanResult struct {
	pageSize uint32
	pages    uint64 // pages read
	recs     []found
	heads    map[uuid.UUID]SessionInfo
	// base and baseState are meta/base and meta/base_state when found
	// (baseState nil when it fails its checksum).
	base      uint64
	baseState []byte
	// archive is the file of the latest journal.archived record found,
	// and archiveThrough its Through.
	archive        string
	archiveThrough uint64
	checkpoints    int // checkpoint values seen (sealed, under an 8-byte key)
}

// scanChunk is how many pages the scan reads at a time to find the leaf
// pages (each of which it then reads with its overflow).
const scanChunk = 64

// scanPages reads f's pages raw (see above).
func scanPages(f *os.File) (*scanResult, error) {
	res := &scanResult{heads: map[uuid.UUID]SessionInfo{}}
	first := make([]byte, 4096)
	n, err := f.ReadAt(first, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	m, ok := parseMeta(first[:n])
	if m1, ok1 := readMeta(f, int64(max(m.pageSize, uint32(os.Getpagesize())))); ok1 && (!ok || m1.txid > m.txid) {
		m, ok = m1, true
	}
	// Without a valid meta, the scan reads to the end of the file, at the
	// OS's page size; with one, the pages below its high-water mark (the
	// pages past it are not committed) that the file still holds.
	res.pageSize = uint32(os.Getpagesize())
	end := ^uint64(0)
	var free []uint64
	if ok {
		res.pageSize, end = m.pageSize, m.pgid
		free, _ = freePages(f, m) // unreadable: skip nothing
	}
	ps := int64(res.pageSize)
	dec := events.NewDecoder()
	buf := make([]byte, scanChunk*ps)
	for start := uint64(2); start < end; start += scanChunk {
		want := min(uint64(scanChunk), end-start) * uint64(ps)
		got, err := f.ReadAt(buf[:want], int64(start)*ps)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		for i := int64(0); i+ps <= int64(got); i += ps {
			id := start + uint64(i/ps)
			if _, isFree := slices.BinarySearch(free, id); isFree {
				continue
			}
			hdr := buf[i : i+pageHeader]
			le := binary.LittleEndian
			if le.Uint64(hdr) != id || le.Uint16(hdr[8:]) != leafPageFlag {
				continue
			}
			res.pages++
			// The page with its overflow, as far as the file holds it.
			p, err := io.ReadAll(io.NewSectionReader(f, int64(id)*ps, (int64(le.Uint32(hdr[12:]))+1)*ps))
			if err != nil {
				return nil, err
			}
			res.leaf(dec, p, int64(id)*ps)
		}
		if uint64(got) < want {
			break // the end of the file
		}
	}
	return res, nil
}

// leaf takes what reads from the leaf page p, which starts at offset off
// of the file, and from the inline buckets in it.
func (res *scanResult) leaf(dec *events.Decoder, p []byte, off int64) {
	le := binary.LittleEndian
	count := min(int(le.Uint16(p[10:])), (len(p)-pageHeader)/pageElemSize)
	for i := range count {
		at := pageHeader + i*pageElemSize
		e := p[at:]
		flags, pos, ksize, vsize := le.Uint32(e), int64(le.Uint32(e[4:])), int64(le.Uint32(e[8:])), int64(le.Uint32(e[12:]))
		kat := int64(at) + pos
		if kat+ksize+vsize > int64(len(p)) {
			continue
		}
		k, v := p[kat:kat+ksize], p[kat+ksize:kat+ksize+vsize]
		if flags&bucketLeafFlag != 0 {
			// An inline bucket: its page follows the bucket header.
			if len(v) >= bucketHeader+pageHeader && le.Uint64(v) == 0 && le.Uint16(v[bucketHeader+8:]) == leafPageFlag {
				res.leaf(dec, v[bucketHeader:], off+kat+ksize+bucketHeader)
			}
			continue
		}
		res.element(dec, k, v, off+kat+ksize)
	}
}

// element takes the leaf element k, v whose value is at offset off of
// the file, if it is a record, a head or the base.
func (res *scanResult) element(dec *events.Decoder, k, v []byte, off int64) {
	if len(k) == 8 {
		gpos := binary.BigEndian.Uint64(k)
		ev, err := dec.Decode(v)
		if err != nil {
			if !events.CheckCRC(v) {
				return // garbage
			}
			h, herr := dec.DecodeHeader(v)
			if herr != nil {
				// Sealed as a record is, but not one: a checkpoint.
				res.checkpoints++
				return
			}
			ev = h
		}
		if ev.GPos != gpos || ev.Seq == 0 || ev.Session == uuid.Nil {
			return
		}
		f := found{sid: ev.Session, seq: ev.Seq, gpos: gpos, off: off, n: len(v)}
		if err != nil {
			f.bad = "does not decode: " + err.Error()
		} else if a, ok := ev.Payload.(*events.JournalArchived); ok && a.Through >= res.archiveThrough {
			res.archive, res.archiveThrough = a.File, a.Through
		}
		res.recs = append(res.recs, f)
	} else if len(k) == 16 {
		sid := uuid.UUID(k)
		var h head
		if parseHead(sid, v, &h) && h.info.LastSeq >= res.heads[sid].LastSeq {
			res.heads[sid] = h.info
		}
	} else if string(k) == string(keyBase) {
		if n, err := parseBase(v); err == nil {
			res.base = n
		}
	} else if string(k) == string(keyBaseState) {
		if data, ok := unsealValue(v); ok {
			res.baseState = data
		}
	}
}

// sessionRecs sorts the records found by session, seq and position, drops
// exact copies (a stale page's), and returns them grouped by session.
func (res *scanResult) sessionRecs() map[uuid.UUID][]found {
	slices.SortFunc(res.recs, func(a, b found) int {
		return cmp.Or(slices.Compare(a.sid[:], b.sid[:]), cmp.Compare(a.seq, b.seq), cmp.Compare(a.gpos, b.gpos))
	})
	res.recs = slices.CompactFunc(res.recs, func(a, b found) bool { return a.sid == b.sid && a.seq == b.seq && a.gpos == b.gpos })
	out := map[uuid.UUID][]found{}
	for _, r := range res.recs {
		out[r.sid] = append(out[r.sid], r)
	}
	return out
}
