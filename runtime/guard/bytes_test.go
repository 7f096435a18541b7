package guard

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// TestLowerTable: the case folding of both scanners lowers exactly the
// ASCII capitals.
func TestLowerTable(t *testing.T) {
	for c := range 256 {
		want := byte(c)
		if c < utf8.RuneSelf {
			want = byte(unicode.ToLower(rune(c)))
		}
		if got := lowerTable[c]; got != want {
			t.Errorf("lowerTable[%q] = %q, want %q", byte(c), got, want)
		}
	}
}

// TestRedactAfterEscapeAtStart: a credential right after a JSON escape
// (\n, \b, \u001b) at the very start of the text starts a word.
func TestRedactAfterEscapeAtStart(t *testing.T) {
	const tok = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
	for _, esc := range []string{`\n`, `\b`, `\t`, `\u001b`, `\u00e9`} {
		in := esc + tok
		if got := string(NewRedactor(nil).Redact([]byte(in))); strings.Contains(got, tok) || !strings.HasPrefix(got, esc+"[REDACTED") {
			t.Errorf("Redact(%q) = %q", in, got)
		}
	}
	// Escaped backslashes before a letter: the letter is text.
	for _, in := range []string{`\\n` + tok, `\\\\u001b` + tok} {
		if got := string(NewRedactor(nil).Redact([]byte(in))); got != in {
			t.Errorf("Redact(%q) = %q, want it unchanged", in, got)
		}
	}
}
