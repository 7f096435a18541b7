package store

import (
	"encoding/binary"

	"github.com/google/uuid"
)

// SessionInfo summarises one session (stream) as kept in heads/. It is
// updated in the same transaction as the session's events.
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

// headVersion is the first byte of an encoded SessionInfo.
const headVersion = 1

// headLen is the length of an encoded SessionInfo: version, five uint64s
// and the chain head. The session ID is the key.
const headLen = 1 + 5*8 + 32

// appendHead appends the fixed binary encoding of s to dst.
func appendHead(dst []byte, s *SessionInfo) []byte {
	dst = append(dst, headVersion)
	dst = binary.BigEndian.AppendUint64(dst, s.LastSeq)
	dst = binary.BigEndian.AppendUint64(dst, s.FirstGPos)
	dst = binary.BigEndian.AppendUint64(dst, s.LastGPos)
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.FirstTime))
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.LastTime))
	return append(dst, s.Head[:]...)
}

// parseHead decodes what appendHead wrote; ok is false for anything else.
func parseHead(sid uuid.UUID, v []byte) (SessionInfo, bool) {
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
	return s, true
}
