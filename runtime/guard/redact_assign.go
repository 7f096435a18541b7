package guard

import (
	"bytes"
	"strings"
)

// Detectors of credentials by the name they are assigned to: name=value,
// name: value, "name":"value" in JSON (escaped or not), where the name
// looks secret (secretKeyName).

// assignedValue looks at an '=' or a ':' (followed by a space or tab) at
// i: if a name that looks secret (secretKeyName) stands right before it,
// at a word boundary (DB_PASSWORD=v, export GITHUB_TOKEN=v, ?api_key=v&,
// password: v), it returns the span of the value: a quoted value ('v',
// "v", or \"v\" in JSON text) up to its closing quote, otherwise up to
// the first space, control character, backslash (a JSON escape: the end
// of the line), quote, & or < or backquote; after an authorization scheme
// (Authorization: Bearer v), the credential. Booleans, nulls and numbers
// are not secrets; after "name: " or "name = " the value must end its
// line, as in YAML or INI (aws_secret_access_key = v): a Go struct field
// (ClientSecret: cfg.Secret,), a TypeScript property (token: string;) or
// a call (token = fetch()) is code, not a secret.
func assignedValue(b []byte, i int) (span, bool) {
	// INI files and code put spaces around '=' (aws_secret_access_key = v).
	e := i
	if b[i] == '=' {
		for e > 0 && i-e < 16 && (b[e-1] == ' ' || b[e-1] == '\t') {
			e--
		}
	}
	spaced := e < i
	k := e
	for k > 0 && e-k <= 64 && assignNameByte[b[k-1]] {
		k--
	}
	if k == e || e-k > 64 || !boundaryBefore(b, k) {
		return span{}, false
	}
	if b[i] == ':' && (i+1 >= len(b) || b[i+1] != ' ' && b[i+1] != '\t') ||
		b[i] == '=' && i+1 < len(b) && b[i+1] == '=' { // ==: a comparison, base64 padding
		return span{}, false
	}
	if !secretKeyName(b[k:e]) {
		return span{}, false
	}
	// A quoted value: end is -1 without a closing quote, a span valueSpan
	// refuses as it does an empty one.
	j := skipSpace(b, i+1)
	switch {
	case j < len(b) && (b[j] == '"' || b[j] == '\''):
		end := bytes.IndexByte(b[j+1:min(len(b), j+1+maxAssigned)], b[j])
		return valueSpan(j+1, j+1+end)
	case hasPrefixAt(b, j, `\"`):
		end := bytes.Index(b[j+2:min(len(b), j+2+maxAssigned)], []byte(`\"`))
		return valueSpan(j+2, j+2+end)
	}
	// A cookie header (Cookie: a=1; sid=v, Set-Cookie: sid=v; Path=/):
	// the rest of the line, every cookie in it.
	if b[i] == ':' && isCookieName(b[k:e]) {
		end := j
		for end-j < maxAssigned && !lineEndsAt(b, end) { // the end of b ends the line
			if b[end] == '\\' {
				end++ // an escaped byte (\" inside JSON text)
			}
			end++
		}
		return valueSpan(j, min(end, len(b)))
	}
	// An HTTP authorization value (Authorization: Bearer v): the
	// credential after the scheme.
	for _, scheme := range authSchemes {
		if hasPrefixFold(b, j, scheme) {
			j = skipSpace(b, j+len(scheme))
			break
		}
	}
	end := j
	for end < len(b) && assignValueByte[b[end]] {
		end++
	}
	v := b[j:end]
	if plainValue(v) {
		return span{}, false
	}
	// After "name: ", only a value that ends its line (YAML), not one of
	// code (a struct field's expression, ending in ',' or holding
	// brackets) or of prose (more words follow).
	if (b[i] == ':' || spaced) && (!lineEndsAt(b, end) || v[len(v)-1] == ',' || v[len(v)-1] == ';' || bytes.ContainsAny(v, "({[")) {
		return span{}, false
	}
	return valueSpan(j, end)
}

// isCookieName reports whether name is a cookie header's (Cookie,
// Set-Cookie), any case.
func isCookieName(name []byte) bool {
	n := len(name)
	return n >= 6 && bytes.EqualFold(name[n-6:], []byte("cookie")) && (n == 6 || name[n-7] == '-')
}

// plainValue reports whether an unquoted value is empty, a boolean, null
// or a number, or a variable reference (${GITHUB_TOKEN}, $API_KEY): a
// setting or a name, not a secret (persist-credentials: false).
func plainValue(v []byte) bool {
	switch strings.ToLower(string(v)) {
	case "", "true", "false", "null", "nil", "none", "yes", "no", "on", "off", "~":
		return true
	}
	if varRef(v) {
		return true
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// varRef reports whether v is a variable reference: ${name}, or $NAME as
// environment variables are named (a password that merely starts with
// '$', $ecret1, is not taken for one).
func varRef(v []byte) bool {
	name, ok := bytes.CutPrefix(v, []byte("$"))
	if !ok {
		return false
	}
	lower := false
	if inner, ok := bytes.CutPrefix(name, []byte("{")); ok {
		if name, ok = bytes.CutSuffix(inner, []byte("}")); !ok {
			return false
		}
		lower = true
	}
	return len(name) > 0 && (name[0] < '0' || name[0] > '9') && !bytes.ContainsFunc(name, func(r rune) bool {
		return !(r == '_' || r >= 'A' && r <= 'Z' || lower && r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	})
}

// lineEndsAt reports whether b's line, or the quoted string the value is
// in, ends at end: the end of b, a line break (raw, or \n or \r in JSON
// text), or a closing quote (", ', or \" in JSON text: curl -H
// "X-Api-Key: v").
func lineEndsAt(b []byte, end int) bool {
	if end >= len(b) || b[end] == '\n' || b[end] == '\r' || b[end] == '"' || b[end] == '\'' {
		return true
	}
	return b[end] == '\\' && end+1 < len(b) && (b[end+1] == 'n' || b[end+1] == 'r' || b[end+1] == '"')
}

// authSchemes are the HTTP authorization schemes assignedValue keeps in
// front of the credential it redacts.
var authSchemes = []string{"bearer ", "basic ", "token ", "bot ", "digest "}

// maxAssigned bounds a quoted value assignedValue looks for the end of.
const maxAssigned = 1024

// assignNameByte marks the bytes of a name before '=' or ':';
// assignValueByte those of an unquoted value.
var assignNameByte, assignValueByte = func() (n, v [256]bool) {
	for c := range 256 {
		n[c] = isAlnum(byte(c)) || c == '_' || c == '-' || c == '.'
		v[c] = c > ' ' && c != 0x7f && strings.IndexByte("\\\"'&<`", byte(c)) < 0
	}
	return n, v
}()

// quoteDepth returns how deeply the quote at b[i] may be escaped: k, the
// backslashes right before it, is 0 for a quote of the JSON text itself,
// 1 for one inside a string (\"), 3 for one inside a string inside a
// string (\\\"), 2^d - 1 at depth d. For a run of another length it
// returns the deepest such k below it (the backslashes before are taken
// as text), and -1 for a run that is too long.
func quoteDepth(b []byte, i int) int {
	r := 0
	for r < i && b[i-1-r] == '\\' {
		r++
	}
	if r > maxQuoteRun {
		return -1
	}
	k := 0
	for 2*k+1 <= r {
		k = 2*k + 1
	}
	return k
}

// shallower returns the next depth secretValue tries after k: the quote
// of a key escaped at all is tried at every escaped depth down to 1, never
// as a quote of the JSON text itself.
func shallower(k int) int {
	if k <= 1 {
		return -1
	}
	return (k - 1) / 2
}

// maxQuoteRun bounds quoteDepth: four levels of nesting.
const maxQuoteRun = 15

// valueStart checks, at b[j] right after a key, for the key's closing
// quote, a colon and the opening quote of a string value, all quoted k
// deep as the key was, and returns where the value's text starts.
func valueStart(b []byte, j, k int) (int, bool) {
	if !quoteAt(b, j, k) {
		return 0, false
	}
	j = skipSpace(b, j+k+1)
	if j >= len(b) || b[j] != ':' {
		return 0, false
	}
	j = skipSpace(b, j+1)
	if !quoteAt(b, j, k) {
		return 0, false
	}
	return j + k + 1, true
}

// quoteAt reports whether b[j:] starts with k backslashes and a quote.
func quoteAt(b []byte, j, k int) bool {
	if j+k >= len(b) || b[j+k] != '"' {
		return false
	}
	for _, c := range b[j : j+k] {
		if c != '\\' {
			return false
		}
	}
	return true
}

// valueEnd returns the span of a string value's text that starts at
// b[start] and is quoted k deep. At depth d (k = 2^d - 1) the closing
// quote is the first one after r backslashes with r mod 2^(d+1) = k: the
// text's own backslashes come in multiples of 2^(d+1) and its own quotes
// after 2^(d+1) - 1 more. A quote escaped less deeply than the value ends
// it too (the text it was in has ended).
func valueEnd(b []byte, start, k int) (span, bool) {
	period := 2 * (k + 1)
	for j := start; j < len(b); j++ {
		if b[j] != '\\' && b[j] != '"' {
			continue
		}
		r := 0
		for j < len(b) && b[j] == '\\' {
			r++
			j++
		}
		if j < len(b) && b[j] == '"' && (r%period == k || r < k) {
			return valueSpan(start, j-r)
		}
	}
	return span{}, false
}

// valueSpan returns the span of a value from from to to, if it holds
// anything: an empty value hides nothing (nor does a span that ends
// before it starts).
func valueSpan(from, to int) (span, bool) {
	if to-from < 1 {
		return span{}, false
	}
	return span{from, to}, true
}

// secretKeyWords are the parts of a key name that mark its value secret,
// matched case-insensitively with '_', '-' and '.' removed.
var secretKeyWords = []string{"token", "password", "passwd", "passphrase", "secret", "authorization",
	"apikey", "accesskey", "privatekey", "credential", "cookie", "sessionkey", "clientsecret", "signature"}

// secretKeyNotWords are key names that contain a secret word but hold
// counts or metadata (max_tokens, token_count, token_type).
var secretKeyNotWords = []string{"tokens", "count", "type", "usage", "limit", "expires", "length", "url", "uri", "endpoint", "path", "name", "id", "file", "dir"}

// secretKeyName reports whether a JSON key names a secret.
func secretKeyName(key []byte) bool {
	// Most keys hold none of the letters that mark a secret word.
	rare := false
	for _, c := range key {
		rare = rare || secretKeyLetter[c]
	}
	if !rare {
		return false
	}
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
	for i := 0; i+1 < len(k) && !hit; i++ {
		for _, w := range secretKeyWordsAt[k[i]] {
			// Every word is longer than 2 bytes: compare the second first.
			if w[1] == k[i+1] && len(k)-i >= len(w) && string(k[i:i+len(w)]) == string(w) {
				hit = true
				break
			}
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

// secretKeyLetter marks, in both cases, the rarest letter of each secret
// key word (by the order of English letter frequency, rarest first): a
// key without any of them holds no secret word.
var secretKeyLetter = func() (t [256]bool) {
	const rarestFirst = "zqjxkvbpgwyfmculdhrsnioate"
	for _, w := range secretKeyWords {
		at := 0
		for i := range len(w) {
			if strings.IndexByte(rarestFirst, w[i]) < strings.IndexByte(rarestFirst, w[at]) {
				at = i
			}
		}
		t[w[at]], t[w[at]-'a'+'A'] = true, true
	}
	return t
}()

// secretKeyWordsAt lists the secret key words by their first byte.
var secretKeyWordsAt = func() (t [256][][]byte) {
	for _, w := range secretKeyWords {
		t[w[0]] = append(t[w[0]], []byte(w))
	}
	return t
}()

var secretKeyNotWordsB = byteWords(secretKeyNotWords)

func byteWords(ws []string) [][]byte {
	out := make([][]byte, len(ws))
	for i, w := range ws {
		out[i] = []byte(w)
	}
	return out
}
