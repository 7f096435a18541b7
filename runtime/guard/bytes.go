package guard

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Byte-level helpers shared by the scanners: prefixes, boundaries, JSON
// escapes, byte classes.

func hasPrefixAt(b []byte, i int, p string) bool {
	return bytes.HasPrefix(b[i:], []byte(p))
}

// hasPrefixFold reports whether b[i:] starts with p (lower case), ASCII
// case insensitively.
func hasPrefixFold(b []byte, i int, p string) bool {
	if len(b)-i < len(p) {
		return false
	}
	for k := 0; k < len(p); k++ {
		if lowerTable[b[i+k]] != p[k] {
			return false
		}
	}
	return true
}

// lowerTable maps each byte to its ASCII lower case.
var lowerTable = func() (t [256]byte) {
	for i := range t {
		t[i] = byte(i)
		if i >= 'A' && i <= 'Z' {
			t[i] = byte(i) + 'a' - 'A'
		}
	}
	return t
}()

// boundaryBefore reports whether b[i] starts a word: b[i-1] is not a
// token byte, or it ends a JSON escape that stands for one. The Redactor
// reads JSON, where a line break or tab before a token is the two bytes
// `\n` or `\t`, and a control character `\u001b`.
func boundaryBefore(b []byte, i int) bool {
	return i == 0 || !isTokenDash(b[i-1]) || escapeEndsAt(b, i)
}

// escapeEndsAt reports whether a JSON escape of a character that is not a
// token byte ends just before b[i]: \b \f \n \r \t, or \uXXXX.
func escapeEndsAt(b []byte, i int) bool {
	if i >= 2 && strings.IndexByte("bfnrt", b[i-1]) >= 0 && escapingBackslash(b, i-2) {
		return true
	}
	if i >= 6 && b[i-5] == 'u' && escapingBackslash(b, i-6) {
		if v, err := strconv.ParseUint(string(b[i-4:i]), 16, 16); err == nil {
			return v >= utf8.RuneSelf || !isTokenDash(byte(v))
		}
	}
	return false
}

// escapingBackslash reports whether b[j] is a backslash that starts an
// escape: it ends an odd run of backslashes (in `\\n` the n is a letter).
func escapingBackslash(b []byte, j int) bool {
	n := 0
	for ; j >= 0 && b[j] == '\\'; j-- {
		n++
	}
	return n%2 == 1
}

func skipSpace(b []byte, j int) int {
	for j < len(b) && (b[j] == ' ' || b[j] == '\t') {
		j++
	}
	return j
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func isTokenByte(c byte) bool { return isAlnum(c) || c == '_' }

func isTokenDash(c byte) bool { return isAlnum(c) || c == '_' || c == '-' }

func isBase64URL(c byte) bool { return isAlnum(c) || c == '_' || c == '-' }

var keyByte = func() (t [256]bool) {
	for c := range 256 {
		t[c] = isKeyByte(byte(c))
	}
	return t
}()

func isKeyByte(c byte) bool {
	return isAlnum(c) || c == '_' || c == '-' || c == '.' || c == '$' || c == '@'
}

func isBearerByte(c byte) bool { return isAlnum(c) || strings.IndexByte("-._~+/=", c) >= 0 }
