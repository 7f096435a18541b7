package sdkjson

import (
	"encoding/json"
	"errors"
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
