package gateway

import "testing"

func TestValidID(t *testing.T) {
	for id, want := range map[string]bool{
		`"a-1"`: true, `""`: true, `7`: true, `-7`: true, `0`: true, `123456789012345`: true,
		`1234567890123456`: false, // past float64's integers: go-sdk's to answer
		`1.5`: false, `1e3`: false, `7-`: false, `null`: false, `{}`: false, `[1]`: false, `true`: false, ``: false,
	} {
		if got := validID([]byte(id)); got != want {
			t.Errorf("validID(%s) = %v, want %v", id, got, want)
		}
	}
}

func TestAcceptsBoth(t *testing.T) {
	for _, tc := range []struct {
		accept []string
		want   bool
	}{
		{[]string{"application/json, text/event-stream"}, true},
		{[]string{"application/json", "text/event-stream"}, true},
		{[]string{"text/event-stream;q=0.9, application/json;q=1"}, true},
		{[]string{"*/*"}, true},
		{[]string{"Application/JSON, Text/Event-Stream"}, true},
		{[]string{"application/*, text/*"}, true},
		{[]string{"application/json"}, false},
		{[]string{"text/event-stream"}, false},
		{nil, false},
	} {
		if got := acceptsBoth(tc.accept); got != tc.want {
			t.Errorf("acceptsBoth(%q) = %v, want %v", tc.accept, got, tc.want)
		}
	}
}
