package guard

import (
	"slices"
	"testing"
	"unsafe"
)

// TestRedactArgs: a stdio server's command line loses every credential
// the patterns find and the argument after a flag that names a secret,
// unless that argument is a flag, empty or a variable reference.
func TestRedactArgs(t *testing.T) {
	m := func(v string) string { return string(redactMarker([]byte(v))) }
	for _, tc := range []struct{ args, want []string }{
		{[]string{"--password", "hunter2"}, []string{"--password", m("hunter2")}},
		{[]string{"run", "-token", "t0k"}, []string{"run", "-token", m("t0k")}},
		{[]string{"--api-key=abc123", "x"}, []string{"--api-key=" + m("abc123"), "x"}},
		{[]string{"postgres://u:pw@h/db"}, []string{"postgres://u:" + m("pw") + "@h/db"}},
		{[]string{"--password=x", "y"}, []string{"--password=" + m("x"), "y"}}, // y is not the flag's
		{[]string{"--password", "-v"}, []string{"--password", "-v"}},
		{[]string{"--password", ""}, []string{"--password", ""}},
		{[]string{"--token", "${TOKEN}", "--token", "$TOKEN"}, []string{"--token", "${TOKEN}", "--token", "$TOKEN"}},
		{[]string{"hunter2", "--password"}, []string{"hunter2", "--password"}},
		{[]string{"-", "y", "--", "y", "password", "y"}, []string{"-", "y", "--", "y", "password", "y"}},
		{[]string{"--log-level", "debug"}, []string{"--log-level", "debug"}},
	} {
		args := slices.Clone(tc.args)
		got := RedactArgs(args)
		if !slices.Equal(got, tc.want) {
			t.Errorf("RedactArgs(%q) = %q, want %q", tc.args, got, tc.want)
		}
		if !slices.Equal(args, tc.args) {
			t.Errorf("RedactArgs(%q) changed its argument to %q", tc.args, args)
		}
		if unchanged := slices.Equal(tc.args, tc.want); unchanged != (&got[0] == &args[0]) {
			t.Errorf("RedactArgs(%q): returned args itself: %v, want %v", tc.args, !unchanged, unchanged)
		}
	}
}

// TestRedactString: RedactString returns s itself when there is nothing
// to replace, and the redacted text otherwise, even when the marker is
// as long as what it replaced.
func TestRedactString(t *testing.T) {
	var r Redactor
	for _, s := range []string{"", "nothing to see", `{"path":"/a/b"}`} {
		if got := r.RedactString(s); got != s || len(s) > 0 && unsafe.StringData(got) != unsafe.StringData(s) {
			t.Errorf("RedactString(%q) = %q, a copy", s, got)
		}
	}
	value := "abcdefghijklmnopqrstuvwxyz"
	if len(value) != len(redactMarker(nil)) {
		t.Fatal("the value must be as long as a marker")
	}
	if got, want := r.RedactString("password="+value), "password="+string(redactMarker([]byte(value))); got != want {
		t.Errorf("RedactString = %q, want %q", got, want)
	}
}
