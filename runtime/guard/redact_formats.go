package guard

import (
	"bytes"
	"strings"
)

// Detectors of credentials by their own format, wherever they stand: PEM
// private keys, passwords in URLs, JWTs, provider tokens (ghp_, sk-, xoxb-,
// AKIA), bearer credentials.

// pemPrivateKey looks at the BEGIN of a PEM header at i ("-----BEGIN
// RSA PRIVATE KEY-----", OPENSSH, EC, ENCRYPTED, a PGP PRIVATE KEY BLOCK):
// for a private key it returns the span of the body, up to "-----END" (or
// maxPEM bytes, or the end of b: a cut key is still a key). The header
// and footer lines stay, so the journal shows what kind of key it was.
func pemPrivateKey(b []byte, i int) (span, bool) {
	head := i + len("BEGIN ")
	label, _, ok := bytes.Cut(b[head:min(len(b), head+64)], []byte("-----"))
	if !ok || !bytes.HasSuffix(label, []byte("PRIVATE KEY")) && !bytes.HasSuffix(label, []byte("PRIVATE KEY BLOCK")) {
		return span{}, false
	}
	body := head + len(label) + len("-----")
	stop := min(len(b), body+maxPEM)
	if e := bytes.Index(b[body:stop], []byte("-----END")); e >= 0 {
		stop = body + e
	}
	return valueSpan(body, stop)
}

// maxPEM bounds the body of a PEM private key pemPrivateKey redacts (a
// 4096-bit RSA key is 3.2 KB, an armoured PGP key a few more).
const maxPEM = 16 << 10

// urlPassword looks at a colon at i: if it starts the "://" of a URL
// with a user and a password (scheme://user:password@host), it returns
// the span of the password. A URL with a user only (ssh://git@host) or
// none is left alone.
func urlPassword(b []byte, i int) (span, bool) {
	if !hasPrefixAt(b, i, "://") {
		return span{}, false
	}
	j := i + 3
	user := j
	for j < len(b) && j-user <= maxURLPart && urlUserByte[b[j]] {
		j++
	}
	if j == user || j >= len(b) || b[j] != ':' {
		return span{}, false
	}
	j++
	pass := j
	for j < len(b) && j-pass <= maxURLPart && urlPassByte[b[j]] {
		j++
	}
	if j == pass || j >= len(b) || b[j] != '@' {
		return span{}, false
	}
	return span{pass, j}, true
}

// maxURLPart bounds the user and the password urlPassword reads.
const maxURLPart = 256

// urlUserByte marks the bytes of a URL's user name (RFC 3986 userinfo
// before the first colon); urlPassByte those of its password: anything
// printable but what ends it (@ / ? #), space, quotes and backslashes
// (the JSON it is in), and < > (markup).
var urlUserByte, urlPassByte = func() (u, p [256]bool) {
	for c := range 256 {
		u[c] = isAlnum(byte(c)) || strings.IndexByte("-._~%!$&'()*+,;=", byte(c)) >= 0
		p[c] = c > ' ' && c != 0x7f && strings.IndexByte("@/?#\"\\<>", byte(c)) < 0
	}
	return u, p
}()

// secretValue looks at a quote at i: if it opens a key that looks secret
// (`"api_key": "v"`, or escaped inside a string, `\"api_key\": \"v\"`, at
// any depth of nesting: JSON in a string of JSON in a tool's text), it
// returns the span of the value's text.
func secretValue(b []byte, i int) (span, bool) {
	// The key: a short run of name characters, closed by the same quote.
	j := i + 1
	rare := false // the key holds a letter of secretKeyLetter
	for j < len(b) && j-i < 64 && keyByte[b[j]] {
		rare = rare || secretKeyLetter[b[j]]
		j++
	}
	// !rare: no secret word (see secretKeyName), nor an empty key. A key
	// that runs to the end of b, or longer than 63 bytes (the loop stops
	// on a key byte), has no closing quote for valueStart.
	if !rare {
		return span{}, false
	}
	for k := quoteDepth(b, i); k >= 0; k = shallower(k) {
		if start, ok := valueStart(b, j, k); ok {
			if !secretKeyName(b[i+1 : j]) {
				return span{}, false
			}
			return valueEnd(b, start, k)
		}
	}
	return span{}, false
}

// jwt matches header.payload.signature at i, each part base64url and the
// payload at least a few bytes.
func jwt(b []byte, i int) (span, bool) {
	j := i
	for part := 0; part < 3; part++ {
		start := j
		for j < len(b) && isBase64URL(b[j]) {
			j++
		}
		if j-start < 8 {
			return span{}, false
		}
		if part < 2 {
			if j >= len(b) || b[j] != '.' {
				return span{}, false
			}
			j++
		}
	}
	return span{i, j}, true
}

// tokenRun matches at least minLen token bytes from start and returns the
// span from `from` to the end of the run.
func tokenRun(b []byte, from, start, minLen int, ok func(byte) bool) (span, bool) {
	j := start
	for j < len(b) && ok(b[j]) {
		j++
	}
	if j-start < minLen {
		return span{}, false
	}
	return span{from, j}, true
}
