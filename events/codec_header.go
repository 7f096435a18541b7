package events

import (
	"encoding/binary"
	"math"
)

// The record header is a msgpack map, written by hand rather than through
// reflection: appendHeader produces exactly the bytes the msgpack encoder
// (sorted map keys, compact ints) produced for the header struct, and
// parseHeader reads those bytes back without allocating, as it reads keys
// in any order and integers and strings of any width. Anything else that
// the reflective decoder accepts (unknown or repeated keys, nil values, a
// map16 header) makes parseHeader give up, and the caller falls back to
// the reflective decoder, so both paths agree on every input
// (TestHeaderParserAgrees, FuzzHeaderParser).

// msgpack codes used by the header.
const (
	mpFixMap   = 0x80 // 0x80..0x8f
	mpFixStr   = 0xa0 // 0xa0..0xbf
	mpNegFix   = 0xe0 // 0xe0..0xff
	mpBin8     = 0xc4
	mpBin16    = 0xc5
	mpBin32    = 0xc6
	mpUint8    = 0xcc
	mpUint16   = 0xcd
	mpUint32   = 0xce
	mpUint64   = 0xcf
	mpInt8     = 0xd0
	mpInt16    = 0xd1
	mpInt32    = 0xd2
	mpInt64    = 0xd3
	mpStr8     = 0xd9
	mpStr16    = 0xda
	mpStr32    = 0xdb
	mpMap16    = 0xde
	headerKeys = 9 // fields of header; at most this many keys
)

// kindInfo is a known kind and its current payload version.
type kindInfo struct {
	kind Kind
	v    uint16
}

// kinds maps each kind's name to the Kind constant and its current version,
// so the codec neither allocates a string per decoded kind nor calls
// Kind.Version (which allocates a payload to test validity).
var kinds = func() map[string]kindInfo {
	m := make(map[string]kindInfo, len(Kinds()))
	for _, k := range Kinds() {
		m[string(k)] = kindInfo{k, k.Version()}
	}
	return m
}()

// version is k.Version() without allocating.
func version(k Kind) uint16 { return kinds[string(k)].v }

// appendStr appends s as a msgpack string, in the shortest form.
func appendStr(dst []byte, s string) []byte {
	return append(appendStrLen(dst, len(s)), s...)
}

// appendStrLen appends the head of a msgpack string of n bytes.
func appendStrLen(dst []byte, n int) []byte {
	if n < 32 {
		return append(dst, mpFixStr|byte(n))
	}
	if n <= math.MaxUint8 {
		return append(dst, mpStr8, byte(n))
	}
	if n <= math.MaxUint16 {
		return binary.BigEndian.AppendUint16(append(dst, mpStr16), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(dst, mpStr32), uint32(n))
}

// appendUint appends n as a compact msgpack integer.
func appendUint(dst []byte, n uint64) []byte {
	if n <= math.MaxInt8 {
		return append(dst, byte(n))
	}
	if n <= math.MaxUint8 {
		return append(dst, mpUint8, byte(n))
	}
	if n <= math.MaxUint16 {
		return binary.BigEndian.AppendUint16(append(dst, mpUint16), uint16(n))
	}
	if n <= math.MaxUint32 {
		return binary.BigEndian.AppendUint32(append(dst, mpUint32), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(dst, mpUint64), n)
}

// appendInt appends n as a compact msgpack integer.
func appendInt(dst []byte, n int64) []byte {
	if n >= 0 {
		return appendUint(dst, uint64(n))
	}
	if n >= -32 {
		return append(dst, byte(n))
	}
	if n >= math.MinInt8 {
		return append(dst, mpInt8, byte(n))
	}
	if n >= math.MinInt16 {
		return binary.BigEndian.AppendUint16(append(dst, mpInt16), uint16(n))
	}
	if n >= math.MinInt32 {
		return binary.BigEndian.AppendUint32(append(dst, mpInt32), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(dst, mpInt64), uint64(n))
}

// appendHeader appends e's header with payload version v.
func appendHeader(dst []byte, e *Event, v uint16) []byte {
	n := 7
	if e.Server != "" {
		n++
	}
	if e.Cause != 0 {
		n++
	}
	dst = append(dst, mpFixMap|byte(n))
	dst = append(dst, mpFixStr|2, 'i', 'd', mpBin8, 16)
	dst = append(dst, e.ID[:]...)
	dst = append(dst, mpFixStr|3, 's', 'i', 'd', mpBin8, 16)
	dst = append(dst, e.Session[:]...)
	dst = appendUint(append(dst, mpFixStr|3, 's', 'e', 'q'), e.Seq)
	dst = appendUint(append(dst, mpFixStr|4, 'g', 'p', 'o', 's'), e.GPos)
	dst = appendInt(append(dst, mpFixStr|2, 't', 's'), e.Time)
	dst = appendStr(append(dst, mpFixStr|4, 'k', 'i', 'n', 'd'), string(e.Kind))
	dst = appendUint(append(dst, mpFixStr|1, 'v'), uint64(v))
	if e.Server != "" {
		dst = appendStr(append(dst, mpFixStr|6, 's', 'e', 'r', 'v', 'e', 'r'), e.Server)
	}
	if e.Cause != 0 {
		dst = appendUint(append(dst, mpFixStr|5, 'c', 'a', 'u', 's', 'e'), e.Cause)
	}
	return dst
}

// Header fields, as bits of parseHeader's seen set.
const (
	hID = 1 << iota
	hSession
	hSeq
	hGPos
	hTime
	hKind
	hV
	hServer
	hCause
)

// headerParser reads msgpack values from the front of a record body.
type headerParser struct {
	b []byte
	p int
}

// code reads one byte: a value's msgpack type code.
func (h *headerParser) code() (byte, bool) {
	if h.p >= len(h.b) {
		return 0, false
	}
	c := h.b[h.p]
	h.p++
	return c, true
}

// be reads an unsigned big-endian integer of size bytes.
func (h *headerParser) be(size int) (uint64, bool) {
	if len(h.b)-h.p < size {
		return 0, false
	}
	var u uint64
	for _, c := range h.b[h.p : h.p+size] {
		u = u<<8 | uint64(c)
	}
	h.p += size
	return u, true
}

// int reads an integer of any msgpack width as the reflective decoder
// stores it in a uint64 or int64 field (two's complement).
func (h *headerParser) int() (uint64, bool) {
	c, ok := h.code()
	if !ok {
		return 0, false
	}
	if c <= 0x7f { // positive fixint
		return uint64(c), true
	}
	if c >= mpNegFix {
		return uint64(int64(int8(c))), true
	}
	var u uint64
	switch c {
	case mpUint8:
		return h.be(1)
	case mpUint16:
		return h.be(2)
	case mpUint32:
		return h.be(4)
	case mpUint64, mpInt64:
		return h.be(8)
	case mpInt8:
		u, ok = h.be(1)
		return uint64(int64(int8(u))), ok
	case mpInt16:
		u, ok = h.be(2)
		return uint64(int64(int16(u))), ok
	case mpInt32:
		u, ok = h.be(4)
		return uint64(int64(int32(u))), ok
	}
	return 0, false
}

// str reads a msgpack string or binary value (the reflective decoder takes
// either for a string or a []byte field) and returns its bytes, aliasing
// the record.
func (h *headerParser) str() ([]byte, bool) {
	c, ok := h.code()
	if !ok {
		return nil, false
	}
	var n uint64
	switch c {
	case mpStr8, mpBin8:
		n, ok = h.be(1)
	case mpStr16, mpBin16:
		n, ok = h.be(2)
	case mpStr32, mpBin32:
		n, ok = h.be(4)
	default:
		n, ok = uint64(c&0x1f), c&0xe0 == mpFixStr
	}
	if !ok || uint64(len(h.b)-h.p) < n {
		return nil, false
	}
	end := h.p + int(n)
	s := h.b[h.p:end:end]
	h.p = end
	return s, true
}

// parseHeader decodes the header at the front of body into e (ID, Session,
// Seq, GPos, Time, Kind, V as stored, Server, Cause) and returns its length.
// ok is false when the header is not in a form parseHeader knows, or is
// malformed: the caller then decodes it reflectively, which accepts or
// rejects it exactly as before. Server names are interned through strs.
func parseHeader(body []byte, e *Event, strs *interner) (n int, ok bool) {
	h := headerParser{b: body}
	// The encoder writes a fixmap; a header as a map16 or map32 is left to
	// msgpack.
	c, ok := h.code()
	if !ok || c&0xf0 != mpFixMap {
		return 0, false
	}
	keys := int(c & 0x0f)
	if keys > headerKeys {
		return 0, false // duplicate or unknown keys: let msgpack decide
	}
	seen := 0
	for range keys {
		key, ok := h.str() // msgpack reads a key as it reads a string
		if !ok {
			return 0, false
		}
		var bit int
		switch string(key) {
		case "id", "sid":
			bit = hID
			if len(key) == 3 {
				bit = hSession
			}
			b, ok := h.str()
			if !ok || len(b) != 16 {
				return 0, false
			}
			if bit == hID {
				copy(e.ID[:], b)
			} else {
				copy(e.Session[:], b)
			}
		case "seq", "gpos", "cause", "v", "ts":
			u, ok := h.int()
			if !ok {
				return 0, false
			}
			switch string(key) {
			case "seq":
				bit, e.Seq = hSeq, u
			case "gpos":
				bit, e.GPos = hGPos, u
			case "cause":
				bit, e.Cause = hCause, u
			case "v":
				bit, e.V = hV, uint16(u)
			default:
				bit, e.Time = hTime, int64(u)
			}
		case "kind":
			b, ok := h.str()
			if !ok {
				return 0, false
			}
			bit = hKind
			if ki, known := kinds[string(b)]; known {
				e.Kind = ki.kind
			} else {
				e.Kind = Kind(b)
			}
		case "server":
			b, ok := h.str()
			if !ok {
				return 0, false
			}
			bit, e.Server = hServer, strs.get(b)
		default:
			return 0, false
		}
		if seen&bit != 0 {
			return 0, false
		}
		seen |= bit
	}
	if seen&(hID|hSession) != hID|hSession {
		return 0, false
	}
	return h.p, true
}
