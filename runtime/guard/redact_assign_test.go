package guard

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestRedactAssignments: exactly which value is replaced after a name
// that looks secret, and what is left alone.
func TestRedactAssignments(t *testing.T) {
	name64 := strings.Repeat("x", 64-len("_password")) + "_password"
	for _, tc := range []struct{ in, want string }{
		{"DB_PASSWORD=hunter2!x", "DB_PASSWORD=«hunter2!x»"},
		{`{"t":"DB_PASSWORD=hunter2\nexport X=1"}`, `{"t":"DB_PASSWORD=«hunter2»\nexport X=1"}`},
		// Quoted values, to the closing quote.
		{"password='abc def' x", "password='«abc def»' x"},
		{`password="abc def" x`, `password="«abc def»" x`},
		{`{"t":"password=\"abc def\" x"}`, `{"t":"password=\"«abc def»\" x"}`},
		{"password='' x", "password='' x"},
		{`{"t":"password=\"\" x"}`, `{"t":"password=\"\" x"}`},
		{"password='unclosed", "password='unclosed"},
		{`{"t":"password=\"unclosed"}`, `{"t":"password=\"unclosed"}`},
		{`Cookie: \"`, `Cookie: \"`},
		// Spaces around '=' (INI), up to 16 before it.
		{"aws_secret_access_key = v", "aws_secret_access_key = «v»"},
		{"password" + strings.Repeat(" ", 16) + "= v", "password" + strings.Repeat(" ", 16) + "= «v»"},
		{"password" + strings.Repeat(" ", 17) + "= v", "password" + strings.Repeat(" ", 17) + "= v"},
		// A name of up to 64 bytes.
		{name64 + "=v", name64 + "=«v»"},
		{"." + name64 + "=v", "." + name64 + "=v"},
		{strings.Repeat("x", 62) + "pa=v", strings.Repeat("x", 62) + "pa=v"}, // the start of a word is not the word
		// After a colon, a space or a tab, and a value that ends its line.
		{"password:\tv", "password:\t«v»"},
		{"password:v", "password:v"},
		{"password:", "password:"},
		{"password=", "password="},
		{"token==abc", "token==abc"},
		{`{"t":"password: s3cret\r\n"}`, `{"t":"password: «s3cret»\r\n"}`},
		{`password: s3cret\`, `password: s3cret\`},
		// Authorization schemes stay.
		{"Authorization: Bearer abc123", "Authorization: Bearer «abc123»"},
		{"Authorization: basic Zm9v", "Authorization: basic «Zm9v»"},
		{"token=Bearer ", "token=Bearer "},
		// Numbers, and variable references, are not secrets.
		{"token_ttl=3600 password=0 password=9", "token_ttl=3600 password=0 password=9"},
		{"password=0a", "password=«0a»"},
		{"password=$AZ09_ password=${az_AZ09} password=$TOKEN", "password=$AZ09_ password=${az_AZ09} password=$TOKEN"},
		{"password=$", "password=«$»"},
		{"password=${}", "password=«${}»"},
		{"password=${abc", "password=«${abc»"},
		{"password=$0ABC", "password=«$0ABC»"},
		{"password=$9ABC", "password=«$9ABC»"},
		{"password=$a", "password=«$a»"},
		{"password=$A-B", "password=«$A-B»"},
		// Cookies: the rest of the line, escapes and all.
		{"Cookie: a=1; sid=v\nX: y", "Cookie: «a=1; sid=v»\nX: y"},
		{`{"h":"Cookie: a=b\\"}`, `{"h":"Cookie: «a=b\\»"}`},
	} {
		checkRedacted(t, tc.in, tc.want)
	}
}

// TestRedactAssignedBounds: a quoted value is looked for up to
// maxAssigned bytes after its opening quote (a cookie line, up to
// maxAssigned bytes).
func TestRedactAssignedBounds(t *testing.T) {
	a := func(n int) string { return strings.Repeat("a", n) }
	for _, tc := range []struct{ in, want string }{
		{"password='" + a(maxAssigned-1) + "'", "password='«" + a(maxAssigned-1) + "»'"},
		{"password='" + a(maxAssigned) + "'", "password='" + a(maxAssigned) + "'"},
		{`password=\"` + a(maxAssigned-2) + `\"`, `password=\"«` + a(maxAssigned-2) + `»\"`},
		{`password=\"` + a(maxAssigned-1) + `\"`, `password=\"` + a(maxAssigned-1) + `\"`},
		{"Cookie: " + a(maxAssigned+5), "Cookie: «" + a(maxAssigned) + "»" + a(5)},
	} {
		checkRedacted(t, tc.in, tc.want)
	}
}

// TestRedactNestingDepth: a secret key is found in JSON nested in
// strings up to four deep (15 backslashes before a quote), not deeper;
// right after a backslash of the text it is in, which lengthens the run
// of backslashes before its quote, up to three deep.
func TestRedactNestingDepth(t *testing.T) {
	for _, tc := range []struct {
		text    string
		deepest int
	}{
		{`{"password":"s3cret-v"}`, 4},
		{`\"password":"s3cret-v"`, 3},
	} {
		text := []byte(tc.text)
		for depth := 1; depth <= 5; depth++ {
			text, _ = json.Marshal(string(text))
			got := NewRedactor(nil).Redact(text)
			if redacted := !bytes.Contains(got, []byte("s3cret-v")); redacted != (depth <= tc.deepest) {
				t.Errorf("%s at depth %d: %s", tc.text, depth, got)
			}
		}
	}
}

// TestRedactJSONKeys: a secret key's string value, in JSON and in JSON
// in strings; a key's quotes and the value's must be escaped alike, and
// a text that ends before the value does is left alone.
func TestRedactJSONKeys(t *testing.T) {
	key63 := strings.Repeat("x", 63-len("_password")) + "_password"
	for _, tc := range []struct{ in, want string }{
		{`{"password": "v"}`, `{"password": "«v»"}`},
		// Keys of up to 63 bytes.
		{`{"` + key63 + `":"v"}`, `{"` + key63 + `":"«v»"}`},
		{`{"x` + key63 + `":"v"}`, `{"x` + key63 + `":"v"}`},
		{`{"":"v","password`, `{"":"v","password`},
		{`{"t":"{\"password\":\"v\\\"w\"}"}`, `{"t":"{\"password\":\"«v\\\"w»\"}"}`},
		// An escaped quote, then a key closed by a quote of the JSON
		// text: a key of a string, not of the JSON text.
		{`{"x\"token":"public"}`, `{"x\"token":"public"}`},
		// A run of backslashes longer than maxQuoteRun before a key's
		// quote is not read as quoting (8 backslashes of text, then a
		// key in a string).
		{`{"t":"` + strings.Repeat(`\\`, 8) + `\"password\":\"v\""}`, `{"t":"` + strings.Repeat(`\\`, 8) + `\"password\":\"v\""}`},
		{`{"t":"` + strings.Repeat(`\\`, 7) + `\"password\":\"v\""}`, `{"t":"` + strings.Repeat(`\\`, 7) + `\"password\":\"«v»\""}`},
		// Cut texts.
		{`{"t":"\"password\`, `{"t":"\"password\`},
		{`{"password": `, `{"password": `},
		{`{"password":"unterminated`, `{"password":"unterminated`},
		{`{"password":"abc\`, `{"password":"abc\`},
	} {
		checkRedacted(t, tc.in, tc.want)
	}
}

// TestSecretKeyLetter: the prefilter of the key check lets every secret
// word through (each holds a marked letter, in either case) and marks
// none of the commonest English letters, which nearly every key holds.
func TestSecretKeyLetter(t *testing.T) {
	for _, w := range secretKeyWords {
		if !strings.ContainsFunc(w, func(r rune) bool { return secretKeyLetter[r] }) ||
			!strings.ContainsFunc(strings.ToUpper(w), func(r rune) bool { return secretKeyLetter[r] }) {
			t.Errorf("%q holds no marked letter", w)
		}
	}
	for _, c := range []byte("etaoinshrETAOINSHR") {
		if secretKeyLetter[c] {
			t.Errorf("%q is marked", c)
		}
	}
}
