package events

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

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
	if e.Payload == nil {
		return dst, fmt.Errorf("encode %s: %w: nil payload", e.Kind, ErrUnknownKind)
	}
	if e.Payload.Kind() != e.Kind {
		return dst, fmt.Errorf("encode: kind %q with payload of kind %q: %w", e.Kind, e.Payload.Kind(), ErrUnknownKind)
	}
	v := e.Kind.Version()
	if v == 0 {
		return dst, fmt.Errorf("encode: %w: %q", ErrUnknownKind, string(e.Kind))
	}
	c.buf.Reset()
	c.buf.Write([]byte{0, 0, 0, 0}) // CRC placeholder
	h := header{ID: e.ID[:], Session: e.Session[:], Seq: e.Seq, GPos: e.GPos, Time: e.Time,
		Kind: string(e.Kind), V: v, Server: e.Server, Cause: e.Cause}
	if err := c.enc.Encode(&h); err != nil {
		return dst, fmt.Errorf("encode header: %w", err)
	}
	if err := c.enc.Encode(e.Payload); err != nil {
		return dst, fmt.Errorf("encode %s payload: %w", e.Kind, err)
	}
	b := c.buf.Bytes()
	binary.BigEndian.PutUint32(b[:4], crc32.Checksum(b[4:], castagnoli))
	return append(dst, b...), nil
}

// Encode returns e encoded as a fresh record.
func Encode(e *Event) ([]byte, error) { return NewEncoder().Append(nil, e) }

// Decoder decodes records. It reuses its msgpack decoder, so it is not safe
// for concurrent use; use [NewDecoder].
type Decoder struct {
	r   bytes.Reader
	dec *msgpack.Decoder
}

// NewDecoder returns a Decoder.
func NewDecoder() *Decoder {
	d := &Decoder{}
	d.dec = msgpack.NewDecoder(&d.r)
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
	var e Event
	if !CheckCRC(rec) {
		return e, fmt.Errorf("%w: CRC mismatch (%d bytes)", ErrCorrupt, len(rec))
	}
	d.r.Reset(rec[4:])
	d.dec.ResetReader(&d.r)
	var h header
	if err := d.dec.Decode(&h); err != nil {
		return e, fmt.Errorf("%w: header: %v", ErrCorrupt, err)
	}
	if len(h.ID) != 16 || len(h.Session) != 16 {
		return e, fmt.Errorf("%w: header ids are %d and %d bytes, want 16", ErrCorrupt, len(h.ID), len(h.Session))
	}
	e.ID, e.Session = uuid.UUID(h.ID), uuid.UUID(h.Session)
	e.Seq, e.GPos, e.Time, e.Kind, e.V, e.Server, e.Cause = h.Seq, h.GPos, h.Time, Kind(h.Kind), h.V, h.Server, h.Cause
	p, err := decodePayload(d.dec, e.Kind, e.V)
	if err != nil {
		return e, fmt.Errorf("seq %d %s v%d: %w", e.Seq, e.Kind, e.V, err)
	}
	e.Payload = p
	e.V = e.Kind.Version()
	if _, err := d.r.ReadByte(); !errors.Is(err, io.EOF) {
		return e, fmt.Errorf("%w: trailing bytes after %s payload", ErrCorrupt, e.Kind)
	}
	return e, nil
}

// Decode decodes one record with a fresh Decoder.
func Decode(rec []byte) (Event, error) { return NewDecoder().Decode(rec) }

// decodePayload decodes the payload of (k, v) and upcasts it to the current
// version of k.
func decodePayload(dec *msgpack.Decoder, k Kind, v uint16) (Payload, error) {
	cur := k.Version()
	switch {
	case cur == 0:
		return nil, fmt.Errorf("%w: %q", ErrUnknownKind, string(k))
	case v == 0 || v > cur:
		return nil, fmt.Errorf("%w: %q version %d (this build knows up to %d)", ErrUnknownKind, string(k), v, cur)
	case v == cur:
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
	if !CheckCRC(rec) {
		return "", 0, "", fmt.Errorf("%w: CRC mismatch", ErrCorrupt)
	}
	var h header
	if err := msgpack.NewDecoder(bytes.NewReader(rec[4:])).Decode(&h); err != nil {
		return "", 0, "", fmt.Errorf("%w: header: %v", ErrCorrupt, err)
	}
	return Kind(h.Kind), h.V, h.Server, nil
}

func crcOf(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }
