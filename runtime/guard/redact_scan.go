package guard

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"strings"
)

// The pattern scanner of Redact: a mask of the byte pairs that can start
// a credential, eight bytes at a time, then a look at each candidate
// (redactAt) that hands over to the detector of its format.

// Byte classes of the pattern scanner.
const (
	clsNone = iota
	clsQuote
	clsG     // ghp_ … github_pat_
	clsS     // sk-
	clsX     // xoxb-
	clsA     // AKIA, ASIA
	clsE     // eyJ (JWT)
	clsB     // Bearer
	clsColon // :// (a URL's user:password@), ": " (YAML: password: v)
	clsEq    // = (DB_PASSWORD=v, ?api_key=v)
)

var redactClass = func() (t [256]uint8) {
	t['"'] = clsQuote
	t['g'] = clsG
	t['s'] = clsS
	t['x'] = clsX
	t['A'] = clsA
	t['e'] = clsE
	t['B'], t['b'] = clsB, clsB
	t[':'] = clsColon
	t['='] = clsEq
	return t
}()

// redactSecond[c] has bit k set if c may follow a first byte of class k
// in a pattern: a key byte after a quote, h (gh?_) or i (github_pat_)
// after g, k after s, o after x, K or S after A, y after e, e or E after
// B or b, / or a space or tab after a colon, anything but = after =.
// Class clsNone has no bit.
var redactSecond = func() (t [256]uint16) {
	for c := range 256 {
		if isKeyByte(byte(c)) {
			t[c] |= 1 << clsQuote
		}
	}
	t['h'] |= 1 << clsG
	t['i'] |= 1 << clsG
	t['k'] |= 1 << clsS
	t['o'] |= 1 << clsX
	t['K'] |= 1 << clsA
	t['S'] |= 1 << clsA
	t['y'] |= 1 << clsE
	t['e'] |= 1 << clsB
	t['E'] |= 1 << clsB
	t['/'] |= 1 << clsColon
	t[' '] |= 1 << clsColon
	t['\t'] |= 1 << clsColon
	for c := range 256 {
		if c != '=' {
			t[c] |= 1 << clsEq
		}
	}
	return t
}()

// span is a byte range of the input to replace.
type span struct{ from, to int }

// redactPatterns replaces secret-keyed JSON values and known credential
// formats.
//
// Every pattern starts with a quote and a key byte, or with a pair such
// as "gh", "sk" or "ey" (redactSecond), so the scan builds a mask of the
// places where such a pair stands, 64 bytes at a time (redactMask), and
// looks only there; redact_ref_test.go keeps the former byte-by-byte
// scan, and TestRedactDifferential holds the two to the same output.
func redactPatterns(b []byte) []byte {
	var spans []span
	next := 0 // where the scan resumes after a match
	for base := 0; base < len(b); base += 64 {
		for m := redactMask(b, base); m != 0; m &= m - 1 {
			i := base + bits.TrailingZeros64(m)
			if i < next {
				continue
			}
			if s, ok := redactAt(b, i); ok {
				spans = append(spans, s)
				next = s.to
			}
		}
	}
	if len(spans) == 0 {
		return b
	}
	out := make([]byte, 0, len(b))
	last := 0
	for _, s := range spans {
		out = append(out, b[last:s.from]...)
		out = append(out, redactMarker(b[s.from:s.to])...)
		last = s.to
	}
	return append(out, b[last:]...)
}

// redactMask returns a mask of the pattern starts in b[base:base+64]
// (base a multiple of 64): bit j when b[base+j] and the byte after it
// are a pair a pattern may start with (redactPairs). One table look-up
// per byte.
func redactMask(b []byte, base int) uint64 {
	var m uint64
	k := 0
	for ; k < 64 && base+k+9 <= len(b); k += 8 {
		w := b[base+k : base+k+9]
		v := uint64(redactPairs[binary.LittleEndian.Uint16(w[0:])]) |
			uint64(redactPairs[binary.LittleEndian.Uint16(w[1:])])<<1 |
			uint64(redactPairs[binary.LittleEndian.Uint16(w[2:])])<<2 |
			uint64(redactPairs[binary.LittleEndian.Uint16(w[3:])])<<3 |
			uint64(redactPairs[binary.LittleEndian.Uint16(w[4:])])<<4 |
			uint64(redactPairs[binary.LittleEndian.Uint16(w[5:])])<<5 |
			uint64(redactPairs[binary.LittleEndian.Uint16(w[6:])])<<6 |
			uint64(redactPairs[binary.LittleEndian.Uint16(w[7:])])<<7
		m |= v << k
	}
	for ; k < 64 && base+k+1 < len(b); k++ { // the last byte of b starts nothing
		m |= uint64(redactPairs[binary.LittleEndian.Uint16(b[base+k:])]) << k
	}
	return m
}

// redactPairs[c0 | c1<<8] is 1 when a pattern may start with the bytes
// c0 c1: c0 of a class and c1 in redactSecond for it.
var redactPairs = func() (t [1 << 16]uint8) {
	for c0 := range 256 {
		cls := redactClass[c0]
		if cls == clsNone {
			continue
		}
		for c1 := range 256 {
			if redactSecond[c1]&(1<<cls) != 0 {
				t[c0|c1<<8] = 1
			}
		}
	}
	return t
}()

// redactAt returns the span to replace for a pattern starting at b[i].
func redactAt(b []byte, i int) (span, bool) {
	n := len(b)
	switch redactClass[b[i]] {
	case clsQuote:
		return secretValue(b, i)
	case clsG:
		if boundaryBefore(b, i) {
			if hasPrefixAt(b, i, "github_pat_") {
				return tokenRun(b, i, i+len("github_pat_"), 20, isTokenByte)
			} else if i+4 <= n && b[i+1] == 'h' && b[i+3] == '_' && strings.IndexByte("pousr", b[i+2]) >= 0 {
				return tokenRun(b, i, i+4, 20, isAlnum)
			}
		}
	case clsS:
		if boundaryBefore(b, i) && hasPrefixAt(b, i, "sk-") {
			return tokenRun(b, i, i+3, 20, isTokenDash)
		}
	case clsX:
		if boundaryBefore(b, i) && i+5 <= n && hasPrefixAt(b, i, "xox") && b[i+4] == '-' && strings.IndexByte("abprs", b[i+3]) >= 0 {
			return tokenRun(b, i, i+5, 10, isTokenDash)
		}
	case clsA:
		if boundaryBefore(b, i) && (hasPrefixAt(b, i, "AKIA") || hasPrefixAt(b, i, "ASIA")) {
			j := i + 4
			for j < n && (b[j] >= 'A' && b[j] <= 'Z' || b[j] >= '0' && b[j] <= '9') {
				j++
			}
			if j-i == 20 && (j == n || !isAlnum(b[j])) {
				return span{i, j}, true
			}
		}
	case clsE:
		if boundaryBefore(b, i) && hasPrefixAt(b, i, "eyJ") {
			return jwt(b, i)
		}
	case clsColon: // b[i+1] exists: redactMask marks no last byte
		if b[i+1] == '/' {
			return urlPassword(b, i)
		}
		return assignedValue(b, i)
	case clsEq:
		return assignedValue(b, i)
	case clsB:
		if b[i] == 'B' && i >= 5 && hasPrefixAt(b, i-5, "-----BEGIN ") {
			return pemPrivateKey(b, i)
		}
		if hasPrefixFold(b, i, "bearer ") && boundaryBefore(b, i) {
			j := i + len("bearer ")
			for j < n && b[j] == ' ' {
				j++
			}
			s, ok := tokenRun(b, j, j, 8, isBearerByte)
			// "Bearer authentication" is prose: a credential has a
			// digit or a symbol.
			return s, ok && bytes.ContainsFunc(b[s.from:s.to], func(r rune) bool { return r < 'A' || r > 'z' || r > 'Z' && r < 'a' })
		}
	}
	return span{}, false
}
