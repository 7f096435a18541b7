package sdkjson

import (
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"
)

type msg struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	ID     any             `json:"id"`
}

// Keys are matched exactly, as go-sdk matches them: a key in another case
// fills nothing (encoding/json would fill the field).
func TestUnmarshalMatchesKeysExactly(t *testing.T) {
	var m msg
	if err := Unmarshal([]byte(` {"Method":"x","method":"tools/call","params":{"a":[1,2]},"id":7} `), &m); err != nil {
		t.Fatal(err)
	}
	if m.Method != "tools/call" || string(m.Params) != `{"a":[1,2]}` || m.ID != 7.0 {
		t.Errorf("decoded %+v", m)
	}
	var folded msg
	if err := Unmarshal([]byte(`{"METHOD":"x"}`), &folded); err != nil || folded.Method != "" {
		t.Errorf("a key in another case: %v %+v", err, folded)
	}
	var std msg
	if err := json.Unmarshal([]byte(`{"METHOD":"x"}`), &std); err != nil || std.Method != "x" {
		t.Fatalf("encoding/json folds case: %v %+v", err, std) // the difference this package exists for
	}
}

func TestUnmarshalRefuses(t *testing.T) {
	deep := strings.Repeat("[", 1001) + strings.Repeat("]", 1001)
	var v any
	if err := Unmarshal([]byte(deep), &v); !errors.Is(err, ErrTooDeep) {
		t.Errorf("1001 deep: %v", err)
	}
	ok := strings.Repeat("[", 1000) + strings.Repeat("]", 1000)
	if err := Unmarshal([]byte(ok), &v); err != nil {
		t.Errorf("1000 deep: %v", err)
	}
	// Brackets in strings, and escaped quotes, do not count.
	inString := `{"s":"` + strings.Repeat(`[\"`, 1001) + `"}`
	if err := Unmarshal([]byte(inString), &v); err != nil {
		t.Errorf("brackets in a string: %v", err)
	}
	for _, bad := range []string{`{"a":1} {"b":2}`, `{"a":1`, ``, `{"a":1}x`} {
		if err := Unmarshal([]byte(bad), &v); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// An Object decodes as a map of raw members, null as nil; it allocates a
// fraction of what segmentio's own map of raw messages does.
func TestObject(t *testing.T) {
	var o Object
	if err := Unmarshal([]byte(`{"a":{"b":[1]},"c":"d"}`), &o); err != nil || len(o) != 2 || string(o["a"]) != `{"b":[1]}` || string(o["c"]) != `"d"` {
		t.Fatalf("%v %q", err, o)
	}
	var s struct {
		O Object   `json:"o"`
		L []Object `json:"l"`
	}
	if err := Unmarshal([]byte(`{"o":null,"l":[{"x":1},{}]}`), &s); err != nil || s.O != nil || len(s.L) != 2 || string(s.L[0]["x"]) != "1" || len(s.L[1]) != 0 {
		t.Fatalf("%v %+v", err, s)
	}
	if err := Unmarshal([]byte(`{"o":[1]}`), &s); err == nil {
		t.Error("an array decoded as an Object")
	}
	data := []byte(`{"type":"text","text":"hello"}`)
	allocated := func(decode func()) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 1000 {
			decode()
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	obj := allocated(func() {
		var o Object
		_ = Unmarshal(data, &o)
	})
	raw := allocated(func() {
		var m map[string]json.RawMessage
		_ = Unmarshal(data, &m)
	})
	if obj*4 > raw {
		t.Errorf("1000 Objects allocate %d bytes, 1000 maps of raw messages %d: want a quarter or less", obj, raw)
	}
}

// BenchmarkUnmarshalMeta: a 2026-07-28 result's _meta (its serverInfo)
// decoded into a nil map, which segmentio's decoder makes with room for 64
// members, and into one made for it, as decodeTextResult does.
func BenchmarkUnmarshalMeta(b *testing.B) {
	raw := []byte(`{"io.modelcontextprotocol/serverInfo":{"name":"mem","version":"1"}}`)
	for _, made := range []bool{false, true} {
		b.Run(map[bool]string{false: "into=nil", true: "into=made"}[made], func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				var m map[string]any
				if made {
					m = make(map[string]any, 1)
				}
				if err := Unmarshal(raw, &m); err != nil || len(m) != 1 {
					b.Fatal(err, m)
				}
			}
		})
	}
}
