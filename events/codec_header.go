package events

import (
	"encoding/binary"
	"math"
)

// The record header is a msgpack map, written by hand rather than through
// reflection: appendHeader produces exactly the bytes the msgpack encoder
// (sorted map keys, compact ints) produced for the header struct, and
// parseHeader reads those bytes back without allocating. Anything else that
// the reflective decoder accepts (other integer or string widths, keys in
// another order, unknown keys, nil values) makes parseHeader give up, and
// the caller falls back to the reflective decoder, so both paths agree on
// every input (TestHeaderParserAgrees, FuzzHeaderParser).

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
	switch n := len(s); {
	case n < 32:
		dst = append(dst, mpFixStr|byte(n))
	case n <= math.MaxUint8:
		dst = append(dst, mpStr8, byte(n))
	case n <= math.MaxUint16:
		dst = append(dst, mpStr16)
		dst = binary.BigEndian.AppendUint16(dst, uint16(n))
	default:
		dst = append(dst, mpStr32)
		dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	}
	return append(dst, s...)
}

// appendUint appends n as a compact msgpack integer.
func appendUint(dst []byte, n uint64) []byte {
	switch {
	case n <= math.MaxInt8:
		return append(dst, byte(n))
	case n <= math.MaxUint8:
		return append(dst, mpUint8, byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, mpUint16), uint16(n))
	case n <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(dst, mpUint32), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(dst, mpUint64), n)
}

// appendInt appends n as a compact msgpack integer.
func appendInt(dst []byte, n int64) []byte {
	switch {
	case n >= 0:
		return appendUint(dst, uint64(n))
	case n >= -32:
		return append(dst, byte(n))
	case n >= math.MinInt8:
		return append(dst, mpInt8, byte(n))
	case n >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(dst, mpInt16), uint16(n))
	case n >= math.MinInt32:
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

// int reads an integer of any msgpack width as the reflective decoder
// stores it in a uint64 or int64 field (two's complement).
func (h *headerParser) int() (uint64, bool) {
	if h.p >= len(h.b) {
		return 0, false
	}
	c := h.b[h.p]
	h.p++
	switch {
	case c <= 0x7f:
		return uint64(c), true
	case c >= mpNegFix:
		return uint64(int64(int8(c))), true
	}
	var size int
	switch c {
	case mpUint8, mpInt8:
		size = 1
	case mpUint16, mpInt16:
		size = 2
	case mpUint32, mpInt32:
		size = 4
	case mpUint64, mpInt64:
		size = 8
	default:
		return 0, false
	}
	if len(h.b)-h.p < size {
		return 0, false
	}
	b := h.b[h.p : h.p+size]
	h.p += size
	switch c {
	case mpUint8:
		return uint64(b[0]), true
	case mpInt8:
		return uint64(int64(int8(b[0]))), true
	case mpUint16:
		return uint64(binary.BigEndian.Uint16(b)), true
	case mpInt16:
		return uint64(int64(int16(binary.BigEndian.Uint16(b)))), true
	case mpUint32:
		return uint64(binary.BigEndian.Uint32(b)), true
	case mpInt32:
		return uint64(int64(int32(binary.BigEndian.Uint32(b)))), true
	}
	return binary.BigEndian.Uint64(b), true // uint64 and int64 alike
}

// str reads a msgpack string or binary value (the reflective decoder takes
// either for a string or a []byte field) and returns its bytes, aliasing
// the record.
func (h *headerParser) str() ([]byte, bool) {
	if h.p >= len(h.b) {
		return nil, false
	}
	c := h.b[h.p]
	h.p++
	var n int
	switch {
	case c&0xe0 == mpFixStr:
		n = int(c & 0x1f)
	case c == mpStr8 || c == mpBin8:
		if h.p >= len(h.b) {
			return nil, false
		}
		n = int(h.b[h.p])
		h.p++
	case c == mpStr16 || c == mpBin16:
		if len(h.b)-h.p < 2 {
			return nil, false
		}
		n = int(binary.BigEndian.Uint16(h.b[h.p:]))
		h.p += 2
	case c == mpStr32 || c == mpBin32:
		if len(h.b)-h.p < 4 {
			return nil, false
		}
		n = int(binary.BigEndian.Uint32(h.b[h.p:]))
		h.p += 4
	default:
		return nil, false
	}
	if n < 0 || len(h.b)-h.p < n {
		return nil, false
	}
	s := h.b[h.p : h.p+n : h.p+n]
	h.p += n
	return s, true
}

// parseHeader decodes the header at the front of body into e (ID, Session,
// Seq, GPos, Time, Kind, V as stored, Server, Cause) and returns its length.
// ok is false when the header is not in a form parseHeader knows, or is
// malformed: the caller then decodes it reflectively, which accepts or
// rejects it exactly as before. Server names are interned through strs.
func parseHeader(body []byte, e *Event, strs *interner) (n int, ok bool) {
	h := headerParser{b: body}
	if len(body) == 0 {
		return 0, false
	}
	var keys int
	switch c := body[0]; {
	case c&0xf0 == mpFixMap:
		keys, h.p = int(c&0x0f), 1
	case c == mpMap16 && len(body) >= 3:
		keys, h.p = int(binary.BigEndian.Uint16(body[1:])), 3
	default:
		return 0, false
	}
	if keys > headerKeys {
		return 0, false // duplicate or unknown keys: let msgpack decide
	}
	seen := 0
	for range keys {
		if h.p >= len(body) || body[h.p]&0xe0 != mpFixStr {
			return 0, false
		}
		kl := int(body[h.p] & 0x1f)
		if len(body)-h.p-1 < kl {
			return 0, false
		}
		key := body[h.p+1 : h.p+1+kl]
		h.p += 1 + kl
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
