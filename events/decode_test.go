package events

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// record returns body as a record: its CRC32C, then body.
func record(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, crcOf(body)), body...)
}

// msgpackRecord encodes each value with msgpack in turn (a header, then a
// payload) and returns them as a record with a correct CRC.
func msgpackRecord(t *testing.T, values ...any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true)
	for _, v := range values {
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
	}
	return record(buf.Bytes())
}

func TestCheckCRC(t *testing.T) {
	for _, tt := range []struct {
		name string
		rec  []byte
		want bool
	}{
		{"one byte body", record([]byte{0x90}), true},
		{"record", func() []byte { e := sample()[0]; b, _ := Encode(&e); return b }(), true},
		{"wrong crc", append([]byte{0, 0, 0, 1}, 0x90), false},
		// The CRC of no bytes is 0: a record needs a body besides.
		{"empty body", record(nil), false},
		{"short", []byte{0, 0}, false},
		{"nil", nil, false},
	} {
		if got := CheckCRC(tt.rec); got != tt.want {
			t.Errorf("%s: CheckCRC(%x) = %v, want %v", tt.name, tt.rec, got, tt.want)
		}
	}
}

// TestDecodeTruncatedOrExtended: a record cut short anywhere, or with bytes
// after its payload, is corrupt even when its CRC matches (as it does when
// the record was written that way), and decoding it does not panic.
func TestDecodeTruncatedOrExtended(t *testing.T) {
	d := NewDecoder()
	for i, e := range sample() {
		rec, err := Encode(&e)
		if err != nil {
			t.Fatal(err)
		}
		body := rec[4:]
		from := 1 // every kind's header is alike: cut the first one's only
		if i > 0 {
			from, _ = parseHeader(body, new(Event), &interner{})
		}
		for n := from; n < len(body); n++ {
			if _, err := d.Decode(record(body[:n])); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s cut to %d of %d bytes: err %v, want ErrCorrupt", e.Kind, n, len(body), err)
			}
		}
		if _, err := d.Decode(record(append(bytes.Clone(body), 0xc0))); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s with a trailing byte: err %v, want ErrCorrupt", e.Kind, err)
		}
	}
}

// TestDecodeHeaderForms: a header in a form the encoder does not write but
// msgpack reads (a map16, a nil server, an unknown key) decodes to the same
// event as the encoder's own header; one whose ids are not 16 bytes, or
// that is not a map, is corrupt.
func TestDecodeHeaderForms(t *testing.T) {
	e := sample()[13] // process.exited
	e.Cause = 0
	want, err := Encode(&e)
	if err != nil {
		t.Fatal(err)
	}
	hdr := func(extra map[string]any) map[string]any {
		m := map[string]any{"id": e.ID[:], "sid": e.Session[:], "seq": e.Seq, "gpos": e.GPos, "ts": e.Time,
			"kind": string(e.Kind), "v": e.Kind.Version(), "server": e.Server}
		for k, v := range extra {
			if v == "delete" {
				delete(m, k)
			} else {
				m[k] = v
			}
		}
		return m
	}
	body := want[4:]
	n, ok := parseHeader(body, new(Event), &interner{})
	if !ok || body[0] != 0x88 {
		t.Fatalf("the encoder's header is not an 8-key fixmap the parser takes: %x", body[:n])
	}
	map16 := append([]byte{0xde, 0, 8}, body[1:]...)

	d := NewDecoder()
	for name, rec := range map[string][]byte{
		"map16":       record(map16),
		"nil cause":   msgpackRecord(t, hdr(map[string]any{"cause": nil}), e.Payload),
		"unknown key": msgpackRecord(t, hdr(map[string]any{"zz": []int{1}}), e.Payload),
	} {
		got, err := d.Decode(rec)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !reflect.DeepEqual(got, e) {
			t.Errorf("%s: decoded %+v, want %+v", name, got, e)
		}
	}
	for name, rec := range map[string][]byte{
		"short id":   msgpackRecord(t, hdr(map[string]any{"id": e.ID[:15]}), e.Payload),
		"long sid":   msgpackRecord(t, hdr(map[string]any{"sid": append(e.Session[:], 0)}), e.Payload),
		"no sid":     msgpackRecord(t, hdr(map[string]any{"sid": "delete"}), e.Payload),
		"not a map":  msgpackRecord(t, "header", e.Payload),
		"bad seq":    msgpackRecord(t, hdr(map[string]any{"seq": "one"}), e.Payload),
		"no payload": msgpackRecord(t, hdr(nil)),
	} {
		if _, err := d.Decode(rec); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err %v, want ErrCorrupt", name, err)
		}
	}
}

// TestDecodeVersions: a record of a kind this build does not know, of a
// version newer than it knows, or of version 0 is refused as unknown; an
// old version is upcast, and only DecodeHeader and PeekKind report it.
func TestDecodeVersions(t *testing.T) {
	for name, rec := range map[string][]byte{
		"unknown kind": rawRecord(t, "alien.kind", 1, &PingFailed{}),
		"future":       rawRecord(t, KindPingFailed, 2, &PingFailed{}),
		"version 0":    rawRecord(t, KindPingFailed, 0, &PingFailed{}),
	} {
		if _, err := Decode(rec); !errors.Is(err, ErrUnknownKind) {
			t.Errorf("%s: err %v, want ErrUnknownKind", name, err)
		}
	}
	rec := rawRecord(t, KindProcessExited, 1, &ProcessExitedV1{PID: 7, Status: "exit status 1"})
	e, err := Decode(rec)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := e.V, KindProcessExited.Version(); got != want {
		t.Errorf("Decode: V = %d, want the current %d", got, want)
	}
	h, err := NewDecoder().DecodeHeader(rec)
	if err != nil || h.V != 1 || h.Kind != KindProcessExited || h.Payload != nil {
		t.Errorf("DecodeHeader = %+v, %v; want v1 without payload", h, err)
	}
	k, v, server, err := PeekKind(rec)
	if err != nil || k != KindProcessExited || v != 1 || server != "s" {
		t.Errorf("PeekKind = %q, %d, %q, %v; want process.exited, 1, \"s\"", k, v, server, err)
	}
	rec[len(rec)-1] ^= 1
	if k, v, server, err := PeekKind(rec); !errors.Is(err, ErrCorrupt) || k != "" || v != 0 || server != "" {
		t.Errorf("PeekKind of a corrupt record = %q, %d, %q, %v; want ErrCorrupt", k, v, server, err)
	}
}
