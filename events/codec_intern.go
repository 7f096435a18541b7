package events

import (
	"errors"
	"io"

	"github.com/vmihailenco/msgpack/v5"
)

// Decoding a payload allocates its struct and, through msgpack's
// reflection, each string field. Most strings in a journal are drawn from a
// small set: server names, lifecycle states, error classes, reasons,
// transports, scopes. A Decoder interns those (header server names and the
// enum-like string types below) in a bounded per-Decoder table, so
// replaying a long journal allocates them once.

// maxInterned bounds a Decoder's table of interned strings, and maxInternLen
// the length of a string worth interning.
const (
	maxInterned  = 1024
	maxInternLen = 64
)

// interner is a Decoder's table of interned strings.
type interner struct {
	m map[string]string
}

// get returns b as a string, from the table if it is there, adding it if
// the table has room.
func (t *interner) get(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if s, ok := t.m[string(b)]; ok { // no allocation for the lookup
		return s
	}
	s := string(b)
	if len(b) <= maxInternLen && len(t.m) < maxInterned {
		if t.m == nil {
			t.m = make(map[string]string)
		}
		t.m[s] = s
	}
	return s
}

// recReader is the io.Reader and io.ByteScanner a Decoder hands to msgpack:
// a record body plus the Decoder's interner. msgpack reads through it
// without buffering (it is a ByteScanner), so the enum decoders below can
// find it with Decoder.Buffered and read a string in place.
type recReader struct {
	b    []byte
	i    int
	strs interner
}

var errUnread = errors.New("events: UnreadByte at the start of a record")

func (r *recReader) reset(b []byte) { r.b, r.i = b, 0 }

func (r *recReader) Read(p []byte) (int, error) {
	if r.i >= len(r.b) {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := copy(p, r.b[r.i:])
	r.i += n
	return n, nil
}

func (r *recReader) ReadByte() (byte, error) {
	if r.i >= len(r.b) {
		return 0, io.EOF
	}
	c := r.b[r.i]
	r.i++
	return c, nil
}

func (r *recReader) UnreadByte() error {
	if r.i <= 0 {
		return errUnread
	}
	r.i--
	return nil
}

// decodeName decodes a string for one of the enum-like string types. Under
// a Decoder it reads short strings in place and interns them; otherwise
// (msgpack.Unmarshal, a foreign decoder) and for any other form it is
// msgpack's own DecodeString, which accepts and rejects the same input.
func decodeName(d *msgpack.Decoder) (string, error) {
	if r, ok := d.Buffered().(*recReader); ok {
		h := headerParser{b: r.b, p: r.i}
		if b, ok := h.str(); ok {
			r.i = h.p
			return r.strs.get(b), nil
		}
	}
	return d.DecodeString()
}

// DecodeMsgpack decodes a ServerState, interning it under a [Decoder].
func (s *ServerState) DecodeMsgpack(d *msgpack.Decoder) error {
	v, err := decodeName(d)
	*s = ServerState(v)
	return err
}

// DecodeMsgpack decodes a Reason, interning it under a [Decoder].
func (s *Reason) DecodeMsgpack(d *msgpack.Decoder) error {
	v, err := decodeName(d)
	*s = Reason(v)
	return err
}

// DecodeMsgpack decodes an ErrorClass, interning it under a [Decoder].
func (s *ErrorClass) DecodeMsgpack(d *msgpack.Decoder) error {
	v, err := decodeName(d)
	*s = ErrorClass(v)
	return err
}

// DecodeMsgpack decodes a Transport, interning it under a [Decoder].
func (s *Transport) DecodeMsgpack(d *msgpack.Decoder) error {
	v, err := decodeName(d)
	*s = Transport(v)
	return err
}

// DecodeMsgpack decodes a Scope, interning it under a [Decoder].
func (s *Scope) DecodeMsgpack(d *msgpack.Decoder) error {
	v, err := decodeName(d)
	*s = Scope(v)
	return err
}
