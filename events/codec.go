package events

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/google/uuid"
	"github.com/vmihailenco/msgpack/v5"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// header is the envelope as it is encoded, before the payload.
type header struct {
	ID      []byte `msgpack:"id"`
	Session []byte `msgpack:"sid"`
	Seq     uint64 `msgpack:"seq"`
	GPos    uint64 `msgpack:"gpos"`
	Time    int64  `msgpack:"ts"`
	Kind    string `msgpack:"kind"`
	V       uint16 `msgpack:"v"`
	Server  string `msgpack:"server,omitempty"`
	Cause   uint64 `msgpack:"cause,omitempty"`
}

// Encoder encodes events into records. It reuses its buffers, so it is not
// safe for concurrent use; the zero value is not ready, use [NewEncoder].
type Encoder struct {
	buf bytes.Buffer
	enc *msgpack.Encoder
}

// NewEncoder returns an Encoder.
func NewEncoder() *Encoder {
	c := &Encoder{}
	c.enc = msgpack.NewEncoder(&c.buf)
	c.enc.SetSortMapKeys(true)
	c.enc.UseCompactInts(true)
	return c
}

// Append encodes e as a record and appends it to dst. e.V is ignored: the
// record carries the kind's current version. The payload must be the
// kind's current payload struct.
func (c *Encoder) Append(dst []byte, e *Event) ([]byte, error) {
	if err := c.encodePayload(e); err != nil {
		return dst, err
	}
	return AppendRecord(dst, e, c.buf.Bytes())
}

// AppendPayload appends the encoding of e's payload to dst: the part of
// e's record that follows its header, and depends on the payload alone.
// With [AppendRecord] it splits Append in two, so that the payload, the
// costly part, can be encoded before the envelope is complete (the
// journal encodes payloads in the appending goroutines and the envelopes
// in its writer). It checks e as Append does.
func (c *Encoder) AppendPayload(dst []byte, e *Event) ([]byte, error) {
	if err := c.encodePayload(e); err != nil {
		return dst, err
	}
	return append(dst, c.buf.Bytes()...), nil
}

// encodePayload checks e and encodes its payload into c.buf.
func (c *Encoder) encodePayload(e *Event) error {
	if e.Payload == nil {
		return fmt.Errorf("encode %s: %w: nil payload", e.Kind, ErrUnknownKind)
	}
	if e.Payload.Kind() != e.Kind {
		return fmt.Errorf("encode: kind %q with payload of kind %q: %w", e.Kind, e.Payload.Kind(), ErrUnknownKind)
	}
	if version(e.Kind) == 0 {
		return fmt.Errorf("encode: %w: %q", ErrUnknownKind, string(e.Kind))
	}
	c.buf.Reset()
	switch p := e.Payload.(type) {
	case *CallStarted:
		c.buf.Write(appendCallStarted(c.buf.AvailableBuffer(), p))
		return nil
	case *CallFinished:
		c.buf.Write(appendCallFinished(c.buf.AvailableBuffer(), p))
		return nil
	}
	if err := c.enc.Encode(e.Payload); err != nil {
		return fmt.Errorf("encode %s payload: %w", e.Kind, err)
	}
	return nil
}

// AppendRecord appends to dst the record of e whose payload, encoded by
// [Encoder.AppendPayload], is payload: the same bytes Append gives. Only
// e's envelope is read (e.Payload is not). It fails for an unknown kind.
func AppendRecord(dst []byte, e *Event, payload []byte) ([]byte, error) {
	v := version(e.Kind)
	if v == 0 {
		return dst, fmt.Errorf("encode: %w: %q", ErrUnknownKind, string(e.Kind))
	}
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0) // CRC placeholder
	dst = appendHeader(dst, e, v)
	dst = append(dst, payload...)
	binary.BigEndian.PutUint32(dst[start:], crc32.Checksum(dst[start+4:], castagnoli))
	return dst, nil
}

// Encode returns e encoded as a fresh record.
func Encode(e *Event) ([]byte, error) { return NewEncoder().Append(nil, e) }

// Decoder decodes records. It reuses its msgpack decoder and interns the
// strings that recur across records (server names, states, error classes),
// so it is not safe for concurrent use; use [NewDecoder].
type Decoder struct {
	r   recReader
	dec *msgpack.Decoder
}

// NewDecoder returns a Decoder.
func NewDecoder() *Decoder {
	d := &Decoder{}
	d.dec = msgpack.NewDecoder(&d.r) // recReader is a ByteScanner: no buffering
	return d
}

// CheckCRC reports whether rec's CRC32C matches its bytes.
func CheckCRC(rec []byte) bool {
	if len(rec) < 5 {
		return false
	}
	return binary.BigEndian.Uint32(rec[:4]) == crc32.Checksum(rec[4:], castagnoli)
}

// Decode decodes a record, checking its CRC and upcasting old payload
// versions. The returned event does not alias rec. Errors wrap
// [ErrCorrupt], [ErrUnknownKind] or [ErrNoUpcaster].
func (d *Decoder) Decode(rec []byte) (Event, error) {
	e, err := d.DecodeHeader(rec)
	if err != nil {
		return e, err
	}
	p, err := decodePayload(d.dec, e.Kind, e.V)
	if err != nil {
		return e, fmt.Errorf("seq %d %s v%d: %w", e.Seq, e.Kind, e.V, err)
	}
	e.Payload = p
	e.V = version(e.Kind)
	if d.r.i != len(d.r.b) {
		return e, fmt.Errorf("%w: trailing bytes after %s payload", ErrCorrupt, e.Kind)
	}
	return e, nil
}

// DecodeHeader decodes a record's envelope without its payload, checking
// the CRC: every field but Payload is set, and V is the version the
// record was stored at. Errors wrap [ErrCorrupt].
func (d *Decoder) DecodeHeader(rec []byte) (Event, error) {
	var e Event
	if !CheckCRC(rec) {
		return e, fmt.Errorf("%w: CRC mismatch (%d bytes)", ErrCorrupt, len(rec))
	}
	body := rec[4:]
	if n, ok := parseHeader(body, &e, &d.r.strs); ok {
		d.r.reset(body[n:])
		return e, nil
	}
	// A header in a form parseHeader does not take: decode it reflectively.
	e = Event{}
	d.r.reset(body)
	var h header
	if err := d.dec.Decode(&h); err != nil {
		return e, fmt.Errorf("%w: header: %v", ErrCorrupt, err)
	}
	if len(h.ID) != 16 || len(h.Session) != 16 {
		return e, fmt.Errorf("%w: header ids are %d and %d bytes, want 16", ErrCorrupt, len(h.ID), len(h.Session))
	}
	e.ID, e.Session = uuid.UUID(h.ID), uuid.UUID(h.Session)
	e.Seq, e.GPos, e.Time, e.Kind, e.V, e.Server, e.Cause = h.Seq, h.GPos, h.Time, Kind(h.Kind), h.V, h.Server, h.Cause
	d.r.reset(body[d.r.i:])
	return e, nil
}

// Decode decodes one record with a fresh Decoder.
func Decode(rec []byte) (Event, error) { return NewDecoder().Decode(rec) }

// decodePayload decodes the payload of (k, v) and upcasts it to the current
// version of k.
func decodePayload(dec *msgpack.Decoder, k Kind, v uint16) (Payload, error) {
	cur := version(k)
	if cur == 0 {
		return nil, fmt.Errorf("%w: %q", ErrUnknownKind, string(k))
	}
	if v == 0 || v > cur {
		return nil, fmt.Errorf("%w: %q version %d (this build knows up to %d)", ErrUnknownKind, string(k), v, cur)
	}
	if v == cur {
		p, _ := newPayload(k)
		if err := dec.Decode(p); err != nil {
			return nil, fmt.Errorf("%w: payload: %v", ErrCorrupt, err)
		}
		return p, nil
	}
	old, ok := legacyPayload(k, v)
	if !ok {
		return nil, fmt.Errorf("%w: %s v%d", ErrNoUpcaster, k, v)
	}
	if err := dec.Decode(old); err != nil {
		return nil, fmt.Errorf("%w: payload v%d: %v", ErrCorrupt, v, err)
	}
	return Upcast(k, v, old)
}

// PeekKind returns the kind, version and server of a record without
// decoding its payload. It checks the CRC.
func PeekKind(rec []byte) (Kind, uint16, string, error) {
	e, err := NewDecoder().DecodeHeader(rec)
	if err != nil {
		return "", 0, "", err
	}
	return e.Kind, e.V, e.Server, nil
}

func crcOf(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }
