package store

import (
	"bytes"
	"errors"
	"fmt"
	"unsafe"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"
)

// Reading a damaged file.
//
// bbolt reads pages through a memory map and trusts the page ids, offsets
// and lengths stored in them. A damaged page makes bbolt, or this package
// copying a key or value bbolt returned, touch memory past the end of the
// file: inside the mapping that is a SIGBUS, outside it a SIGSEGV (or a
// read of unrelated memory). A fault ends the process unless the
// goroutine that takes it has asked for a panic instead with
// debug.SetPanicOnFault, which is per goroutine. So every function that
// touches mapped bytes runs, in its own goroutine, inside
//
//	defer recoverCorrupt(&err)
//	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
//
// for the duration of the transaction: read transactions (Journal.view,
// Journal.read), commits (Journal.commit, in the writer or an appender's
// goroutine) and Open. recoverCorrupt turns the fault, and bbolt's own
// assertion panics on damaged pages, into a *CorruptError. Decoders and
// fn never see mapped bytes: a read copies its records out of the
// transaction (chunk.copyRec) before handing them on.
//
// Faults are the last line. Before copying a record, or formatting a key
// into an error, reads check that it lies inside the pages the
// transaction may use (mapped.holds): that catches a damaged leaf element
// before it faults, names the record, and bounds what a damaged length
// can make a read allocate. Errors hold copies (at most keyTextMax bytes
// of a key, in hex), never mapped slices, which are invalid once the
// transaction ends.

// recoverCorrupt, deferred directly by a function that reads a bbolt
// file (recover works nowhere else), stores a *CorruptError in *err if
// the function panicked: a memory fault (with SetPanicOnFault set) or one
// of bbolt's assertions on a damaged page.
func recoverCorrupt(err *error) {
	if r := recover(); r != nil {
		*err = corruptFromPanic(r)
	}
}

// corruptFromPanic describes a panic recovered while reading the file.
// Its position is unknown here: callers that know what they were reading
// add it with corruptAt.
func corruptFromPanic(r any) *CorruptError {
	if f, ok := r.(interface{ Addr() uintptr }); ok { // runtime.Error of a memory fault
		return &CorruptError{Reason: fmt.Sprintf("a damaged page points outside the file (memory fault at %#x)", f.Addr()), fault: true}
	}
	return &CorruptError{Reason: fmt.Sprintf("bbolt could not read a damaged page: %v", r), fault: true}
}

// corruptAt fills in where a read was when err, a *CorruptError from a
// recovered panic, stopped it: the record it was reading or about to read.
// Any other error is returned unchanged.
func corruptAt(err error, sid uuid.UUID, seq, gpos uint64) error {
	var ce *CorruptError
	if errors.As(err, &ce) && ce.fault && ce.Session == uuid.Nil && ce.Seq == 0 && ce.GPos == 0 {
		ce.Session, ce.Seq, ce.GPos = sid, seq, gpos
	}
	return err
}

// mapped is the part of the memory map a read transaction may use: the
// pages below its high-water mark, [lo, hi), all inside the file (Open
// checked the file's size against it). bbolt maps more than the file,
// at least [lo, end): a key or value there but not below hi is a damaged
// page's. Keys and values a read transaction returns point into the map,
// except those of an inline bucket whose value is not 8-byte aligned,
// which bbolt copies to the heap. A write transaction's may live on the
// heap too: mapped is for read transactions only.
type mapped struct{ lo, hi, end uintptr }

// mappedOf returns the part of the map tx may use.
func mappedOf(tx *bolt.Tx) mapped {
	lo := tx.DB().Info().Data // stable while tx is open: a remap waits for it
	size := uintptr(tx.Size())
	return mapped{lo: lo, hi: lo + size, end: lo + max(size, initialMmapSize)}
}

// holds reports whether b may be read: inside the map, it must lie below
// hi; elsewhere (a copy bbolt made, or a damaged page's pointer past the
// map, whose fault the transaction's guard catches), it must be no longer
// than the file, which bounds what copying it allocates. An empty b
// always may.
func (m mapped) holds(b []byte) bool {
	n := uintptr(len(b))
	if n == 0 {
		return true
	}
	if p := uintptr(unsafe.Pointer(unsafe.SliceData(b))); p >= m.lo && p < m.end {
		return p < m.hi && n <= m.hi-p
	}
	return n <= m.hi-m.lo
}

// ascending reports whether key k sorts after *prev (or *prev is nil),
// then sets *prev to k. A cursor walk returns a bucket's keys in strictly
// ascending order, unless damaged pages send it round in circles: walks
// that no other check ends stop when this fails.
func ascending(prev *[]byte, k []byte) bool {
	ok := *prev == nil || bytes.Compare(*prev, k) < 0
	*prev = k
	return ok
}

// keyTextMax bounds how much of a key or value an error quotes.
const keyTextMax = 32

// text formats key k, found by a read that is about to report it, for an
// error message: in hex, at most keyTextMax bytes of it, and none of it if
// it may not be read (holds). "none" stands for the end of the bucket.
func (m mapped) text(k []byte) string {
	if k == nil {
		return "none"
	}
	return m.format(k, "%x")
}

// quote formats value v for an error message as a quoted string, bounded
// as text is.
func (m mapped) quote(v []byte) string { return m.format(v, "%q") }

func (m mapped) format(b []byte, verb string) string {
	switch {
	case !m.holds(b):
		return fmt.Sprintf("(%d bytes outside the file: damaged page)", len(b))
	case len(b) > keyTextMax:
		return fmt.Sprintf(verb+"… (%d bytes)", b[:keyTextMax], len(b))
	}
	return fmt.Sprintf(verb, b)
}
