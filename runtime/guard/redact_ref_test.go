package guard

// The Redactor's scan as it was before the mask-driven rewrite (commit
// 9b798f9), kept verbatim (identifiers prefixed "ref") as the reference
// that TestRedactDifferential and FuzzRedactDifferential compare the
// Redactor with: a class-table look-up at every byte, and a key check of
// 14 bytes.Contains. It shares the unchanged helpers (tokenRun, jwt,
// valueSpan, the byte predicates, the key word lists) with redact.go, and
// since nested strings (see refSecretValue) its quoting helpers.

import (
	"bytes"
	"strings"
)

// refRedact returns b with every secret replaced. It returns b itself when
// there is nothing to replace.
func refRedact(r Redactor, b []byte) []byte {
	for _, s := range r.secrets {
		if bytes.Contains(b, s) {
			b = bytes.ReplaceAll(b, s, redactMarker(s))
		}
	}
	return refRedactPatterns(b)
}

// refRedactPatterns replaces secret-keyed JSON values and known credential
// formats.
func refRedactPatterns(b []byte) []byte {
	var spans []span
	n := len(b)
	for i := 0; i < n; {
		c := redactClass[b[i]]
		if c == clsNone {
			i++
			continue
		}
		var s span
		ok := false
		switch c {
		case clsQuote:
			s, ok = refSecretValue(b, i)
		case clsG:
			if boundaryBefore(b, i) {
				if hasPrefixAt(b, i, "github_pat_") {
					s, ok = tokenRun(b, i, i+len("github_pat_"), 20, isTokenByte)
				} else if i+4 <= n && b[i+1] == 'h' && b[i+3] == '_' && strings.IndexByte("pousr", b[i+2]) >= 0 {
					s, ok = tokenRun(b, i, i+4, 20, isAlnum)
				}
			}
		case clsS:
			if boundaryBefore(b, i) && hasPrefixAt(b, i, "sk-") {
				s, ok = tokenRun(b, i, i+3, 20, isTokenDash)
			}
		case clsX:
			if boundaryBefore(b, i) && i+5 <= n && hasPrefixAt(b, i, "xox") && b[i+4] == '-' && strings.IndexByte("abprs", b[i+3]) >= 0 {
				s, ok = tokenRun(b, i, i+5, 10, isTokenDash)
			}
		case clsA:
			if boundaryBefore(b, i) && (hasPrefixAt(b, i, "AKIA") || hasPrefixAt(b, i, "ASIA")) {
				j := i + 4
				for j < n && j-i < 20 && (b[j] >= 'A' && b[j] <= 'Z' || b[j] >= '0' && b[j] <= '9') {
					j++
				}
				if j-i == 20 && (j == n || !isAlnum(b[j])) {
					s, ok = span{i, j}, true
				}
			}
		case clsE:
			if boundaryBefore(b, i) && hasPrefixAt(b, i, "eyJ") {
				s, ok = jwt(b, i)
			}
		case clsColon:
			if i+1 < n && b[i+1] == '/' {
				s, ok = urlPassword(b, i)
			} else {
				s, ok = assignedValue(b, i)
			}
		case clsEq:
			s, ok = assignedValue(b, i)
		case clsB:
			if b[i] == 'B' && i >= 5 && hasPrefixAt(b, i-5, "-----BEGIN ") {
				s, ok = pemPrivateKey(b, i)
				break
			}
			if hasPrefixFold(b, i, "bearer ") && boundaryBefore(b, i) {
				j := i + len("bearer ")
				for j < n && b[j] == ' ' {
					j++
				}
				s, ok = tokenRun(b, j, j, 8, isBearerByte)
				// "Bearer authentication" is prose: a credential has a
				// digit or a symbol.
				ok = ok && bytes.ContainsFunc(b[s.from:s.to], func(r rune) bool { return r < 'A' || r > 'z' || r > 'Z' && r < 'a' })
			}
		}
		if ok {
			spans = append(spans, s)
			i = s.to
			continue
		}
		i++
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

// refSecretValue looks at a quote at i: if it opens a key that looks secret
// (`"api_key": "v"`, or escaped inside a string, `\"api_key\": \"v\"`, at
// any depth), it returns the span of the value's text. Its quoting is
// redact.go's (quoteDepth, valueStart, valueEnd, since the Redactor learnt
// nested strings); what it keeps of 9b798f9 is the key check.
func refSecretValue(b []byte, i int) (span, bool) {
	// The key: a short run of name characters, closed by the same quote.
	j := i + 1
	for j < len(b) && j-i <= 64 && isKeyByte(b[j]) {
		j++
	}
	if j == i+1 || j >= len(b) || j-i > 64 {
		return span{}, false
	}
	for k := quoteDepth(b, i); k >= 0; k = shallower(k) {
		if start, ok := valueStart(b, j, k); ok {
			if !refSecretKeyName(b[i+1 : j]) {
				return span{}, false
			}
			return valueEnd(b, start, k)
		}
	}
	return span{}, false
}

// refSecretKeyName reports whether a JSON key names a secret.
func refSecretKeyName(key []byte) bool {
	var buf [64]byte
	k := buf[:0]
	for _, c := range key {
		switch {
		case c == '_' || c == '-' || c == '.':
		case c >= 'A' && c <= 'Z':
			k = append(k, c+'a'-'A')
		default:
			k = append(k, c)
		}
	}
	hit := false
	for _, w := range refSecretKeyWordsB {
		if bytes.Contains(k, w) {
			hit = true
			break
		}
	}
	if !hit {
		return false
	}
	for _, w := range secretKeyNotWordsB {
		if bytes.HasSuffix(k, w) {
			return false
		}
	}
	return true
}

var refSecretKeyWordsB = byteWords(secretKeyWords)
