package events

import (
	"encoding/json"
	"fmt"
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
func (e Event) MarshalJSON() ([]byte, error) {
	p, err := json.Marshal(e.Payload)
	if err != nil {
		return nil, fmt.Errorf("marshal %s payload: %w", e.Kind, err)
	}
	return json.Marshal(jsonEvent{ID: e.ID.String(), Seq: e.Seq, GPos: e.GPos, Session: e.Session.String(),
		Time: time.Unix(0, e.Time).UTC().Format(time.RFC3339Nano), Kind: e.Kind, V: e.V,
		Server: e.Server, Cause: e.Cause, Payload: p})
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
