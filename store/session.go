package store

import (
	"encoding/binary"

	"github.com/google/uuid"
)

// SessionInfo summarises one session (stream) as kept in its head in
// sessions/. It is updated in the same transaction as the session's
// events.
type SessionInfo struct {
	// Session is the session ID (a UUIDv7, so ID order is start order).
	Session uuid.UUID
	// LastSeq is the seq of the session's last event: its version.
	LastSeq uint64
	// FirstGPos and LastGPos are the global positions of the session's
	// first and last events.
	FirstGPos, LastGPos uint64
	// FirstTime and LastTime are the Time fields (unix ns) of the
	// session's first and last events.
	FirstTime, LastTime int64
	// Head is the hash-chain head h_n = SHA-256(h_{n-1} ‖ record_n), with
	// h_0 = 32 zero bytes, over the session's stored records in seq order.
	Head [32]byte
}

// head is a session's head as stored in sessions/: its summary and the
// open segment of its index (see index.go).
type head struct {
	info SessionInfo
	// openSeq is the first seq of the open segment: the seqs before it
	// are in sealed segments in index/.
	openSeq uint64
	// runs are where seqs openSeq..info.LastSeq are in log/.
	runs []run
}

// headVersion is the first byte of an encoded head.
const headVersion = 2

// Encoded head: version, five uint64s, the chain head, openSeq, the
// length of the encoded open runs and room for them. The size is fixed so
// that rewriting a head never grows its leaf (sessions/ is filled to 100 %).
const (
	headFixedLen = 1 + 5*8 + 32 + 8 + 1
	runsCap      = 128
	headLen      = headFixedLen + runsCap
)

// appendHead appends the fixed-size encoding of h to dst. The runs must
// fit in runsCap bytes (see fitsHead).
func appendHead(dst []byte, h *head) []byte {
	s := &h.info
	start := len(dst)
	dst = append(dst, headVersion)
	dst = binary.BigEndian.AppendUint64(dst, s.LastSeq)
	dst = binary.BigEndian.AppendUint64(dst, s.FirstGPos)
	dst = binary.BigEndian.AppendUint64(dst, s.LastGPos)
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.FirstTime))
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.LastTime))
	dst = append(dst, s.Head[:]...)
	dst = binary.BigEndian.AppendUint64(dst, h.openSeq)
	lenAt := len(dst)
	dst = appendRuns(append(dst, 0), h.runs)
	dst[lenAt] = byte(len(dst) - lenAt - 1)
	for len(dst)-start < headLen {
		dst = append(dst, 0)
	}
	return dst
}

// fitsHead reports whether runs fit in a head.
func fitsHead(runs []run) bool { return runsLen(runs) <= runsCap }

// parseInfo decodes the summary of an encoded head; ok is false for
// anything appendHead did not write.
func parseInfo(sid uuid.UUID, v []byte) (SessionInfo, bool) {
	s := SessionInfo{Session: sid}
	if len(v) != headLen || v[0] != headVersion {
		return s, false
	}
	v = v[1:]
	s.LastSeq = binary.BigEndian.Uint64(v[0:])
	s.FirstGPos = binary.BigEndian.Uint64(v[8:])
	s.LastGPos = binary.BigEndian.Uint64(v[16:])
	s.FirstTime = int64(binary.BigEndian.Uint64(v[24:]))
	s.LastTime = int64(binary.BigEndian.Uint64(v[32:]))
	copy(s.Head[:], v[40:])
	return s, s.LastSeq > 0
}

// parseHead decodes a whole head, appending its open runs to h.runs[:0].
func parseHead(sid uuid.UUID, v []byte, h *head) bool {
	info, ok := parseInfo(sid, v)
	if !ok {
		return false
	}
	h.info = info
	h.openSeq = binary.BigEndian.Uint64(v[headFixedLen-9:])
	n := int(v[headFixedLen-1])
	if n > runsCap || h.openSeq == 0 || h.openSeq > info.LastSeq+1 {
		return false
	}
	runs, ok := parseRuns(v[headFixedLen:headFixedLen+n], h.runs[:0])
	h.runs = runs
	return ok && runsEvents(runs) == info.LastSeq+1-h.openSeq
}
