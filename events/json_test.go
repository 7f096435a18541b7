package events

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
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
