package events

import (
	"bytes"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// reflectPayload encodes p with msgpack's reflection and the Encoder's
// settings: the encoding appendCallStarted and appendCallFinished copy.
func reflectPayload(t testing.TB, p Payload) []byte {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true)
	enc.UseCompactInts(true)
	if err := enc.Encode(p); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// callRand draws the values where msgpack's encoding changes form:
// empty and non-empty, string lengths at 31/32, 255/256 and 65535/65536,
// integers at every width boundary and negative ones.
type callRand struct{ r *rand.Rand }

func (c callRand) str() string {
	lens := []int{0, 0, 1, 5, 31, 32, 255, 256, 65535, 65536}
	return strings.Repeat("x", lens[c.r.IntN(len(lens))])
}

func (c callRand) int() int64 {
	edges := []int64{0, 0, 1, 127, 128, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1,
		math.MaxInt64, -1, -32, -33, -128, -129, -32768, -32769, math.MinInt32, math.MinInt32 - 1, math.MinInt64}
	return edges[c.r.IntN(len(edges))]
}

func (c callRand) blob() Blob {
	return Blob{Text: c.str(), Size: c.int(), SHA256: c.str(), Truncated: c.r.IntN(2) == 0}
}

func (c callRand) strs() []string {
	switch c.r.IntN(4) {
	case 0:
		return nil
	case 1:
		return []string{}
	}
	out := make([]string, []int{1, 15, 16, 17}[c.r.IntN(4)])
	for i := range out {
		out[i] = c.str()
	}
	return out
}

// TestCallPayloadsEncodeAsReflection: the hand encoders of the call
// payloads give msgpack's reflection's bytes for every field's forms, so
// journals written before and after them are the same bytes (and hash
// and replay the same). It also fails when a field is added to one of
// these structs and not to its encoder: the fill below sets every field.
func TestCallPayloadsEncodeAsReflection(t *testing.T) {
	c := callRand{rand.New(rand.NewPCG(1, 2))}
	rounds := 1000
	if testing.Short() {
		rounds = 100 // mutation runs: every field form still comes up
	}
	for i := range rounds {
		ps := []Payload{
			&CallStarted{CallID: c.str(), Tool: c.str(), Name: c.str(), Args: c.blob(), Caller: c.str(), Policy: c.str(),
				ApprovedBy: c.str(), DefHash: c.str(), Attempt: int(c.int()), RetryOf: c.str(), TraceParent: c.str(), TraceState: c.str()},
			&CallFinished{CallID: c.str(), Outcome: c.str(), Error: c.str(), Result: c.blob(), DurationNs: c.int(),
				Signals: c.strs(), RenderedChars: c.int(), CutChars: c.int(), WireBytes: c.int(), Retrying: c.r.IntN(2) == 0},
		}
		if i == 0 { // the zero values, and signals at the array16 and array32 edges
			ps = append(ps, &CallStarted{}, &CallFinished{},
				&CallFinished{Signals: make([]string, math.MaxUint16)}, &CallFinished{Signals: make([]string, math.MaxUint16+1)})
		}
		for _, p := range ps {
			var got []byte
			switch p := p.(type) {
			case *CallStarted:
				got = appendCallStarted(nil, p)
			case *CallFinished:
				got = appendCallFinished(nil, p)
			}
			if want := reflectPayload(t, p); !bytes.Equal(got, want) {
				t.Fatalf("%T %+v:\nhand       %x\nreflection %x", p, p, got[:min(len(got), 200)], want[:min(len(want), 200)])
			}
		}
	}
	// Every field is drawn above: a new one must be too.
	for typ, n := range map[reflect.Type]int{reflect.TypeFor[CallStarted](): 12, reflect.TypeFor[CallFinished](): 10,
		reflect.TypeFor[Blob](): 4} {
		if typ.NumField() != n {
			t.Errorf("%s has %d fields, this test and codec_call.go know %d", typ, typ.NumField(), n)
		}
	}
}

// TestCallPayloadsRoundTrip: records of call payloads decode to what was
// encoded, through Encoder.Append.
func TestCallPayloadsRoundTrip(t *testing.T) {
	c := callRand{rand.New(rand.NewPCG(3, 4))}
	enc, dec := NewEncoder(), NewDecoder()
	for range 200 {
		p := &CallFinished{CallID: "c", Outcome: OutcomeOK, Result: c.blob(), DurationNs: c.int(), Signals: []string{"a", c.str()}}
		rec, err := enc.Append(nil, &Event{Kind: KindCallFinished, Seq: 1, Payload: p})
		if err != nil {
			t.Fatal(err)
		}
		got, err := dec.Decode(rec)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Payload, p) {
			t.Fatalf("decoded %+v, want %+v", got.Payload, p)
		}
	}
}

// FuzzCallPayloads: the hand encoders agree with msgpack's reflection on
// arbitrary strings (any bytes, any length) and integers.
func FuzzCallPayloads(f *testing.F) {
	f.Add("019a5b7e", "echo", `{"message":"hi"}`, "sha256:ab", int64(26), int64(-1), uint8(0xff))
	f.Add("", "", "", "", int64(0), int64(math.MinInt64), uint8(0))
	f.Fuzz(func(t *testing.T, a, b, c, d string, n, m int64, flags uint8) {
		on := func(bit int) bool { return flags&(1<<bit) != 0 }
		pick := func(bit int, s string) string {
			if on(bit) {
				return s
			}
			return ""
		}
		blob := Blob{Text: pick(0, c), Size: n, SHA256: pick(1, d), Truncated: on(2)}
		st := &CallStarted{CallID: a, Tool: b, Name: pick(3, c), Args: blob, Caller: pick(4, d), Policy: pick(5, a),
			ApprovedBy: pick(6, b), DefHash: pick(7, d), Attempt: int(m), RetryOf: pick(3, b), TraceParent: pick(5, c), TraceState: pick(6, d)}
		var sig []string
		if on(4) {
			sig = []string{a, b, c, d}
		}
		fin := &CallFinished{CallID: a, Outcome: b, Error: pick(5, c), Result: blob, DurationNs: m, Signals: sig,
			RenderedChars: n, CutChars: m, WireBytes: n, Retrying: on(6)}
		if got, want := appendCallStarted(nil, st), reflectPayload(t, st); !bytes.Equal(got, want) {
			t.Fatalf("call.started %+v: hand %x, reflection %x", st, got, want)
		}
		if got, want := appendCallFinished(nil, fin), reflectPayload(t, fin); !bytes.Equal(got, want) {
			t.Fatalf("call.finished %+v: hand %x, reflection %x", fin, got, want)
		}
	})
}
