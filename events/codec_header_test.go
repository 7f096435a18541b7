package events

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/vmihailenco/msgpack/v5"
)

// reflectHeader encodes e's header the way the codec did before the header
// was written by hand: the header struct through msgpack's reflection.
func reflectHeader(t testing.TB, e *Event, v uint16) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true)
	enc.UseCompactInts(true)
	h := header{ID: e.ID[:], Session: e.Session[:], Seq: e.Seq, GPos: e.GPos, Time: e.Time,
		Kind: string(e.Kind), V: v, Server: e.Server, Cause: e.Cause}
	if err := enc.Encode(&h); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// reflectParse decodes a header reflectively, as the fallback path does,
// and returns it with the number of bytes it took.
func reflectParse(b []byte) (header, int, error) {
	r := bytes.NewReader(b)
	var h header
	err := msgpack.NewDecoder(r).Decode(&h)
	return h, len(b) - r.Len(), err
}

// edgeEvents returns headers around every integer and string width.
func edgeEvents() []Event {
	ints := []uint64{0, 1, 31, 127, 128, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxUint64}
	times := []int64{0, 1, -1, -32, -33, -128, -129, -32768, -32769, math.MinInt32, math.MinInt32 - 1, math.MinInt64,
		127, 128, math.MaxInt64, 1_700_000_000_000_000_000}
	servers := []string{"", "gh", strings.Repeat("s", 31), strings.Repeat("s", 32), strings.Repeat("é", 200), strings.Repeat("x", 70000)}
	var out []Event
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 400 {
		e := Event{ID: uuid.UUID(randBytes(rng)), Session: uuid.UUID(randBytes(rng)),
			Seq: ints[rng.IntN(len(ints))], GPos: ints[rng.IntN(len(ints))], Time: times[i%len(times)],
			Kind: Kinds()[i%len(Kinds())], Server: servers[i%len(servers)], Cause: ints[rng.IntN(len(ints))]}
		out = append(out, e)
	}
	return out
}

func randBytes(rng *rand.Rand) [16]byte {
	var b [16]byte
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// TestHeaderEncodingUnchanged: the hand-written header has exactly the
// bytes of the reflective encoding, so records stay byte-identical.
func TestHeaderEncodingUnchanged(t *testing.T) {
	for _, e := range edgeEvents() {
		for _, v := range []uint16{1, 2, 127, 128, 65535} {
			want := reflectHeader(t, &e, v)
			if got := appendHeader(nil, &e, v); !bytes.Equal(got, want) {
				t.Fatalf("header of %+v v%d:\n got %x\nwant %x", e, v, got, want)
			}
		}
	}
}

// TestHeaderParserAgrees: whatever parseHeader accepts, the reflective
// decoder decodes to the same fields and length; and it accepts every
// header the encoder writes.
func TestHeaderParserAgrees(t *testing.T) {
	for _, e := range edgeEvents() {
		b := append(appendHeader(nil, &e, 3), 0x90) // a payload follows
		var got Event
		n, ok := parseHeader(b, &got, &interner{})
		if !ok {
			t.Fatalf("parseHeader refused the encoder's header %x", b)
		}
		checkAgrees(t, b, got, n)
		want := e
		want.V = 3
		if got != want {
			t.Fatalf("parsed %+v, want %+v", got, want)
		}
	}
	// Forms the encoder never writes: parseHeader either agrees or declines.
	e := edgeEvents()[5]
	loose := msgpack.NewEncoder(nil)
	for name, v := range map[string]any{
		"wide ints": header{ID: e.ID[:], Session: e.Session[:], Seq: 5, GPos: 6, Time: -3, Kind: "x", V: 1},
		"reordered": map[string]any{"v": 1, "sid": e.Session[:], "id": e.ID[:], "kind": "call.started"},
		"extra key": map[string]any{"id": e.ID[:], "sid": e.Session[:], "extra": []int{1, 2}},
		"str ids":   map[string]any{"id": string(e.ID[:]), "sid": string(e.Session[:]), "seq": -1, "v": 70000},
		"nil ids":   map[string]any{"id": nil, "sid": e.Session[:]},
		"short id":  map[string]any{"id": e.ID[:15], "sid": e.Session[:]},
		"float":     map[string]any{"id": e.ID[:], "sid": e.Session[:], "seq": 1.5},
		"dup key":   []byte{0x83, 0xa2, 'i', 'd', 0xc4, 16},
	} {
		var buf bytes.Buffer
		loose.Reset(&buf)
		if b, ok := v.([]byte); ok {
			buf.Write(b)
		} else if err := loose.Encode(v); err != nil {
			t.Fatal(err)
		}
		var got Event
		if n, ok := parseHeader(buf.Bytes(), &got, &interner{}); ok {
			checkAgrees(t, buf.Bytes(), got, n)
			t.Logf("%s: parsed", name)
		}
	}
}

// TestHeaderParserBounds: parseHeader takes the encoder's header with
// nothing after it, to its last byte, and refuses it cut short anywhere
// without reading past the end.
func TestHeaderParserBounds(t *testing.T) {
	for _, e := range edgeEvents()[:96] { // every time with every server, twice
		b := appendHeader(nil, &e, 1)
		var got Event
		if n, ok := parseHeader(b, &got, &interner{}); !ok || n != len(b) {
			t.Fatalf("parseHeader(%x) = %d, %v; want %d, true", b, n, ok, len(b))
		}
		for n := range len(b) {
			if n > 160 && n < len(b)-20 {
				continue // inside a long server name: its ends are enough
			}
			if _, ok := parseHeader(b[:n], &got, &interner{}); ok {
				t.Fatalf("parseHeader took %x cut to %d bytes of %d", b, n, len(b))
			}
		}
	}
}

func checkAgrees(t *testing.T, b []byte, got Event, n int) {
	t.Helper()
	h, hn, err := reflectParse(b)
	if err != nil {
		t.Fatalf("parseHeader took %x, the reflective decoder says %v", b, err)
	}
	if len(h.ID) != 16 || len(h.Session) != 16 {
		t.Fatalf("parseHeader took %x with ids of %d and %d bytes", b, len(h.ID), len(h.Session))
	}
	want := Event{ID: uuid.UUID(h.ID), Session: uuid.UUID(h.Session), Seq: h.Seq, GPos: h.GPos, Time: h.Time,
		Kind: Kind(h.Kind), V: h.V, Server: h.Server, Cause: h.Cause}
	if got != want || n != hn {
		t.Fatalf("%x: parseHeader gives %+v (%d bytes), reflection %+v (%d bytes)", b, got, n, want, hn)
	}
}

// FuzzHeaderParser: on any bytes, parseHeader never panics, and whatever
// it accepts the reflective decoder decodes to the same header.
func FuzzHeaderParser(f *testing.F) {
	for i, e := range edgeEvents() {
		if i%20 == 0 {
			f.Add(appendHeader(nil, &e, 1))
		}
	}
	f.Add([]byte{0x81, 0xa2, 'i', 'd', 0xc4, 16})
	f.Fuzz(func(t *testing.T, b []byte) {
		var got Event
		if n, ok := parseHeader(b, &got, &interner{}); ok {
			checkAgrees(t, b, got, n)
		}
	})
}

// TestInternedNames: a Decoder returns equal events whether a string came
// from its intern table or not, and msgpack.Unmarshal (no Decoder) still
// decodes the enum-like types.
func TestInternedNames(t *testing.T) {
	d := NewDecoder()
	for range 3 {
		for _, e := range sample() {
			rec, _ := Encode(&e)
			got, err := d.Decode(rec)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := Encode(&got)
			if !bytes.Equal(again, rec) {
				t.Fatalf("%s: re-encoding differs after interning", e.Kind)
			}
		}
	}
	var st ServerTransitioned
	b, _ := msgpack.Marshal(&ServerTransitioned{From: StateReady, To: StateFailed, Reason: ReasonExhausted,
		Error: &ClassifiedError{Class: ErrExit}})
	if err := msgpack.Unmarshal(b, &st); err != nil || st.From != StateReady || st.To != StateFailed ||
		st.Reason != ReasonExhausted || st.Error.Class != ErrExit {
		t.Fatalf("Unmarshal = %+v, %v", st, err)
	}
	// nil decodes to "" through the hook, as through msgpack's own string decoder.
	b, _ = msgpack.Marshal(map[string]any{"from": nil, "to": "ready"})
	st = ServerTransitioned{From: StateFailed}
	if err := msgpack.Unmarshal(b, &st); err != nil || st.From != "" || st.To != StateReady {
		t.Fatalf("Unmarshal of nil state = %+v, %v", st, err)
	}
}

// TestDecodeAllocs pins the allocations of decoding the store benchmarks'
// event: its payload struct, the *ClassifiedError, and two plain strings.
func TestDecodeAllocs(t *testing.T) {
	e := benchEvent()
	rec, err := Encode(&e)
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoder()
	if _, err := d.Decode(rec); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = d.Decode(rec) }); n > 4 {
		t.Errorf("Decode allocates %v times per record, want ≤ 4", n)
	}
}

// TestAppendPayloadRecord: a record assembled from AppendPayload and
// AppendRecord is the record Append writes.
func TestAppendPayloadRecord(t *testing.T) {
	enc := NewEncoder()
	for _, e := range sample() {
		want, err := enc.Append([]byte("prefix"), &e)
		if err != nil {
			t.Fatal(err)
		}
		payload, err := enc.AppendPayload([]byte("x"), &e)
		if err != nil {
			t.Fatal(err)
		}
		e.Payload = nil // AppendRecord reads the envelope only
		got, err := AppendRecord([]byte("prefix"), &e, payload[1:])
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: AppendRecord(AppendPayload) = %x, %v; Append = %x", e.Kind, got, err, want)
		}
	}
	e := Event{Kind: "nope"}
	if _, err := AppendRecord(nil, &e, nil); !errors.Is(err, ErrUnknownKind) {
		t.Errorf("AppendRecord of an unknown kind: %v", err)
	}
}
