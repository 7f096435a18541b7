package events

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
)

// jsonEvent is the JSON shape of an event, as `mcpledger log --json` and
// `export` write it, one object per line.
type jsonEvent struct {
	ID      string          `json:"id"`
	Seq     uint64          `json:"seq"`
	GPos    uint64          `json:"gpos"`
	Session string          `json:"session"`
	Time    string          `json:"time"`
	Kind    Kind            `json:"kind"`
	V       uint16          `json:"v"`
	Server  string          `json:"server"`
	Cause   uint64          `json:"cause"`
	Payload json.RawMessage `json:"payload"`
}

// MarshalJSON encodes e as {"id","seq","gpos","session","time","kind","v",
// "server","cause","payload"} with time in RFC 3339 (UTC, nanoseconds).
func (e Event) MarshalJSON() ([]byte, error) { return e.AppendJSON(nil) }

// AppendJSON appends e as MarshalJSON encodes it to dst. It is what
// json.Marshal(e) writes, byte for byte, without encoding/json's
// reflection over the envelope and its two passes over the result (a
// follower prints every event: this is most of its cost).
func (e Event) AppendJSON(dst []byte) ([]byte, error) {
	p, err := json.Marshal(e.Payload) // compact, HTML-escaped, as Marshal leaves an embedded RawMessage
	if err != nil {
		return dst, fmt.Errorf("marshal %s payload: %w", e.Kind, err)
	}
	dst = append(dst, `{"id":"`...)
	dst = appendUUID(dst, e.ID)
	dst = append(dst, `","seq":`...)
	dst = strconv.AppendUint(dst, e.Seq, 10)
	dst = append(dst, `,"gpos":`...)
	dst = strconv.AppendUint(dst, e.GPos, 10)
	dst = append(dst, `,"session":"`...)
	dst = appendUUID(dst, e.Session)
	dst = append(dst, `","time":"`...)
	dst = time.Unix(0, e.Time).UTC().AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, `","kind":`...)
	dst = appendJSONString(dst, string(e.Kind))
	dst = append(dst, `,"v":`...)
	dst = strconv.AppendUint(dst, uint64(e.V), 10)
	dst = append(dst, `,"server":`...)
	dst = appendJSONString(dst, e.Server)
	dst = append(dst, `,"cause":`...)
	dst = strconv.AppendUint(dst, e.Cause, 10)
	dst = append(dst, `,"payload":`...)
	dst = append(dst, p...)
	return append(dst, '}'), nil
}

// appendUUID appends id in its canonical form (hex digits and dashes:
// nothing JSON escapes).
func appendUUID(dst []byte, id uuid.UUID) []byte {
	var b [36]byte
	hex.Encode(b[0:8], id[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], id[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], id[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], id[8:10])
	b[23] = '-'
	hex.Encode(b[24:], id[10:])
	return append(dst, b[:]...)
}

// appendJSONString appends s as json.Marshal quotes it: printable ASCII
// that JSON and encoding/json's HTML escaping leave alone as is, without
// allocating; anything else (control bytes, quotes, backslashes, <, >, &,
// and every non-ASCII byte, for U+2028, U+2029 and invalid UTF-8) through
// encoding/json.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string always marshals
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// UnmarshalJSON decodes what MarshalJSON wrote. The payload is decoded into
// the struct of the event's kind and version, then upcast to the current
// version.
func (e *Event) UnmarshalJSON(b []byte) error {
	var j jsonEvent
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	id, err := uuid.Parse(j.ID)
	if err != nil {
		return fmt.Errorf("event id %q: %w", j.ID, err)
	}
	sid, err := uuid.Parse(j.Session)
	if err != nil {
		return fmt.Errorf("event session %q: %w", j.Session, err)
	}
	t, err := time.Parse(time.RFC3339Nano, j.Time)
	if err != nil {
		return fmt.Errorf("event time %q: %w", j.Time, err)
	}
	cur := j.Kind.Version()
	v := j.V
	if v == 0 {
		v = cur
	}
	var p Payload
	if cur == 0 || v > cur {
		return fmt.Errorf("%w: %q version %d", ErrUnknownKind, string(j.Kind), j.V)
	}
	if v == cur {
		p, _ = newPayload(j.Kind)
		if err := json.Unmarshal(j.Payload, p); err != nil {
			return fmt.Errorf("%s payload: %w", j.Kind, err)
		}
	} else {
		old, ok := legacyPayload(j.Kind, v)
		if !ok {
			return fmt.Errorf("%w: %s v%d", ErrNoUpcaster, j.Kind, v)
		}
		if err := json.Unmarshal(j.Payload, old); err != nil {
			return fmt.Errorf("%s v%d payload: %w", j.Kind, v, err)
		}
		if p, err = Upcast(j.Kind, v, old); err != nil {
			return err
		}
	}
	*e = Event{ID: id, Session: sid, Seq: j.Seq, GPos: j.GPos, Time: t.UnixNano(), Kind: j.Kind,
		V: cur, Server: j.Server, Cause: j.Cause, Payload: p}
	return nil
}
