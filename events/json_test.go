package events

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestJSONVersions: an exported event of an unknown kind or a newer
// version is refused as unknown; one without a version is taken as the
// current version.
func TestJSONVersions(t *testing.T) {
	line := func(kind, v string) []byte {
		return []byte(`{"id":"0190f5a2-7d3c-7a10-8000-0000000000aa","session":"0190f5a2-7d3c-7a10-8000-000000000001",` +
			`"seq":3,"time":"2026-01-02T03:04:05.000000006Z","kind":"` + kind + `"` + v + `,"server":"gh","payload":{"attempt":1,"consecutive":2}}`)
	}
	for name, b := range map[string][]byte{
		"unknown kind": line("alien.kind", `,"v":1`),
		"no kind":      line("", ""),
		"future":       line(string(KindPingFailed), `,"v":2`),
	} {
		var e Event
		if err := json.Unmarshal(b, &e); !errors.Is(err, ErrUnknownKind) {
			t.Errorf("%s: err %v, want ErrUnknownKind", name, err)
		}
	}
	var e Event
	if err := json.Unmarshal(line(string(KindPingFailed), ""), &e); err != nil {
		t.Fatal(err)
	}
	if want := (&PingFailed{Attempt: 1, Consecutive: 2}); e.V != 1 || e.Seq != 3 || e.Server != "gh" ||
		e.At().Nanosecond() != 6 || !reflect.DeepEqual(e.Payload, want) {
		t.Errorf("decoded %+v (payload %+v)", e, e.Payload)
	}
}

// TestJSONRejects: an exported line whose envelope does not parse is an
// error naming the field.
func TestJSONRejects(t *testing.T) {
	e := sample()[12]
	good, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ old, new, want string }{
		{`"id":"`, `"id":"x`, "event id"},
		{`"session":"`, `"session":"x`, "event session"},
		{`"time":"`, `"time":"x`, "event time"},
		{`"payload":{`, `"payload":{"attempt":"one",`, "payload"},
		{`"seq":`, `"seq":-`, ""},
	} {
		b := strings.Replace(string(good), tt.old, tt.new, 1)
		var got Event
		if err := json.Unmarshal([]byte(b), &got); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err %v, want one naming %q", b, err, tt.want)
		}
	}
}

// referenceJSON is how MarshalJSON encoded an event before AppendJSON:
// through encoding/json, reflection and all.
func referenceJSON(e Event) ([]byte, error) {
	p, err := json.Marshal(e.Payload)
	if err != nil {
		return nil, err
	}
	return json.Marshal(jsonEvent{ID: e.ID.String(), Seq: e.Seq, GPos: e.GPos, Session: e.Session.String(),
		Time: time.Unix(0, e.Time).UTC().Format(time.RFC3339Nano), Kind: e.Kind, V: e.V,
		Server: e.Server, Cause: e.Cause, Payload: p})
}

// TestAppendJSONAsReflection: for a sample of every kind, and servers and
// kinds with characters JSON escapes, AppendJSON and json.Marshal write
// exactly what encoding/json wrote.
func TestAppendJSONAsReflection(t *testing.T) {
	evs := sample()
	for _, server := range []string{"", "web", `a"b`, "a<b>&c", "tab\there", "ünï", "\x7f", `back\slash`} {
		e := evs[0]
		e.Server, e.Kind = server, Kind(server)
		evs = append(evs, e)
	}
	for _, e := range evs {
		want, err := referenceJSON(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.AppendJSON([]byte("prefix"))
		if err != nil || string(got) != "prefix"+string(want) {
			t.Errorf("AppendJSON(%s, server %q):\n%s\nwant\n%s", e.Kind, e.Server, got, want)
		}
		if m, err := json.Marshal(e); err != nil || string(m) != string(want) {
			t.Errorf("json.Marshal(%s): %s, %v", e.Kind, m, err)
		}
	}
}

// TestAppendJSONString: names made of printable ASCII are quoted as
// encoding/json quotes them without allocating; everything JSON or HTML
// escaping touches goes through encoding/json.
func TestAppendJSONString(t *testing.T) {
	dst := make([]byte, 0, 256)
	for _, s := range []string{"", "server.transitioned", "a b", "~!#$%'()*+,-./09:;=?@AZ[]^_`az{|}", "\x7f"} {
		want, _ := json.Marshal(s)
		if got := appendJSONString(dst[:0], s); string(got) != string(want) {
			t.Errorf("appendJSONString(%q) = %s, want %s", s, got, want)
		}
		if n := testing.AllocsPerRun(10, func() { dst = appendJSONString(dst[:0], s) }); n != 0 {
			t.Errorf("appendJSONString(%q) allocates %v times: the plain path was not taken", s, n)
		}
	}
	for _, s := range []string{"\x00", "\x1f", `"`, `\`, "<", ">", "&", "\x80", "\xff", "é", "\u2028", "\u2029", "a\tb"} {
		want, _ := json.Marshal("x" + s + "y")
		if got := appendJSONString(dst[:0], "x"+s+"y"); string(got) != string(want) {
			t.Errorf("appendJSONString(%q) = %s, want %s", "x"+s+"y", got, want)
		}
	}
}

// TestJSONLineIsAFixedPoint: an event's JSON line (what export writes and
// import reads back) is the same line again after it is decoded, and
// after it is decoded, stored as a record and read from the journal. So
// an imported session re-exports to the same lines, and a session held in
// a journal compares equal to its own export (mcpledger import). It holds
// for every kind, with its slices full, empty and nil at every depth, and
// for records stored at old versions (upcast on read).
func TestJSONLineIsAFixedPoint(t *testing.T) {
	var evs []Event
	for _, empty := range []bool{false, true} {
		for _, e := range sample() {
			evs = append(evs, e)
			leafSlices(reflect.ValueOf(e.Payload), empty)
			evs = append(evs, e)
		}
	}
	for _, f := range upcastFixtures {
		rec, err := os.ReadFile(filepath.Join("testdata", "upcast", f.file))
		if err != nil {
			t.Fatal(err)
		}
		e, err := Decode(rec)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}
	for _, e := range evs {
		line, err := e.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		var d Event
		if err := json.Unmarshal(line, &d); err != nil {
			t.Fatalf("%s: %v", e.Kind, err)
		}
		again, _ := d.AppendJSON(nil)
		rec, err := Encode(&d)
		if err != nil {
			t.Fatal(err)
		}
		stored, err := Decode(rec)
		if err != nil {
			t.Fatal(err)
		}
		fromJournal, _ := stored.AppendJSON(nil)
		if string(again) != string(line) || string(fromJournal) != string(line) {
			t.Errorf("%s: the line changes\nwritten   %s\nread back %s\nstored    %s", e.Kind, line, again, fromJournal)
		}
	}
}

// leafSlices sets every slice reachable from v (a pointer or struct)
// whose elements are not structs to an empty slice, or to nil; slices of
// structs keep their elements, each treated the same way.
func leafSlices(v reflect.Value, empty bool) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			leafSlices(v.Elem(), empty)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Field(i).CanSet() {
				leafSlices(v.Field(i), empty)
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Struct {
			for i := range v.Len() {
				leafSlices(v.Index(i), empty)
			}
			return
		}
		if empty {
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
		} else {
			v.Set(reflect.Zero(v.Type()))
		}
	}
}
