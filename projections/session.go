package projections

import (
	"encoding/hex"

	"github.com/mcpledger/mcpledger/events"
)

// sessionKey is a session ID as a comparable array, so the package can key
// maps by session without importing the UUID package.
type sessionKey [16]byte

// String renders k in the canonical 8-4-4-4-12 UUID form.
func (k sessionKey) String() string {
	var b [36]byte
	hex.Encode(b[0:8], k[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], k[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], k[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], k[8:10])
	b[23] = '-'
	hex.Encode(b[24:], k[10:16])
	return string(b[:])
}

// sessionTracker decides which events a per-session projection applies: it
// follows the session opened by the latest session.started, and before any
// session.started it adopts the session of the first event it sees.
type sessionTracker struct {
	cur  sessionKey
	have bool
}

// admit reports whether e belongs to the tracked session and whether it
// opens a new one (the caller then resets its per-session state first).
func (t *sessionTracker) admit(e events.Event) (ok, fresh bool) {
	k := sessionKey(e.Session)
	if e.Kind == events.KindSessionStarted {
		fresh = !t.have || k != t.cur
		t.cur, t.have = k, true
		return true, fresh
	}
	if !t.have {
		t.cur, t.have = k, true
		return true, false
	}
	return k == t.cur, false
}

// session returns the tracked session ID, or "" before any event.
func (t *sessionTracker) session() string {
	if !t.have {
		return ""
	}
	return t.cur.String()
}
