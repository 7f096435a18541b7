package runtime

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/mcpledger/mcpledger/events"
)

// minSecretLen is the shortest resolved value treated as a secret: shorter
// values (ports, "1", "true") would redact unrelated text.
const minSecretLen = 6

// redactor rewrites text bound for the journal (a call's arguments and
// result, as JSON) so that no credential reaches it. It replaces, with
// [REDACTED sha256:<8 hex>] (the first 4 bytes of the SHA-256 of what it
// replaced, so equal secrets can be correlated without being revealed):
//
//   - every occurrence of a resolved secret of the server (its env values
//     that look secret, its header values and their credentials), raw and
//     as JSON escapes it;
//   - the string value of any key that looks secret ("token", "password",
//     "secret", "authorization", "api_key", …), in JSON and in JSON
//     escaped inside a JSON string (a tool's text holding JSON), however
//     deeply nested;
//   - the password of a URL (scheme://user:password@host: database DSNs,
//     git remotes);
//   - the value assigned to a name that looks secret outside JSON:
//     DB_PASSWORD=… in a .env file or a shell, api_key=… in a query
//     string, password: … in YAML, aws_secret_access_key = … in INI;
//   - the body of a PEM private key (-----BEGIN … PRIVATE KEY-----);
//   - the credential after "Bearer ", and common key formats: GitHub
//     (ghp_, gho_, ghu_, ghs_, ghr_, github_pat_), sk-… API keys, Slack
//     xox[abprs]-, AWS AKIA/ASIA key IDs, and JWTs (eyJ….eyJ….sig).
//
// It looks for each resolved secret from its rarest byte (IndexByte),
// then for the patterns in one pass that stops only at quotes and word
// starts (BenchmarkRedact), and allocates only when it finds something.
// A redactor is immutable and safe for concurrent use.
type redactor struct {
	secrets [][]byte
	anchors []int // per secret, the offset of its rarest byte (anchorOf)
}

func newRedactor(secrets []string) redactor {
	var s [][]byte
	seen := map[string]bool{}
	add := func(v string) {
		if len(v) >= minSecretLen && !seen[v] {
			seen[v] = true
			s = append(s, []byte(v))
		}
	}
	for _, v := range secrets {
		add(v)
		// As encoding/json writes it inside a string (quotes, backslashes,
		// <, >, & and control characters escaped).
		if b, err := json.Marshal(v); err == nil && len(b) >= 2 {
			add(string(b[1 : len(b)-1]))
			// As servers that escape every non-ASCII character write it
			// (Python's json.dumps): the journal keeps their own bytes.
			add(asciiEscaped(b[1 : len(b)-1]))
		}
	}
	// Longest first, so a secret containing another is replaced whole.
	slices.SortFunc(s, func(a, b []byte) int { return len(b) - len(a) })
	r := redactor{secrets: s, anchors: make([]int, len(s))}
	for i, v := range s {
		r.anchors[i] = anchorOf(v)
	}
	return r
}

// scrub redacts, in place, the text a server's side puts in an
// observation: its stderr tail, stdout lines that were not JSON-RPC, and
// error messages (which quote URLs, responses and logs). A server that
// logs its own token on stderr as it dies would otherwise hand it to the
// journal.
func (r redactor) scrub(p events.Payload) {
	switch p := p.(type) {
	case *events.ProcessExited:
		for i, l := range p.StderrTail {
			p.StderrTail[i] = r.redactString(l)
		}
	case *events.OutputSkipped:
		p.Line = r.redactString(p.Line)
	case *events.ConnectFailed:
		p.Error.Message = r.redactString(p.Error.Message)
	case *events.TransportClosed:
		p.Error.Message = r.redactString(p.Error.Message)
	case *events.PingFailed:
		p.Error = r.redactString(p.Error)
	case *events.ResourcesListed:
		p.Error = r.redactString(p.Error)
	case *events.PromptsListed:
		p.Error = r.redactString(p.Error)
	case *events.HandshakeCompleted:
		p.Instructions = r.redactString(p.Instructions)
	}
}

// redactArgs returns a stdio server's args as journaled: every credential
// the patterns find replaced (--password=v, a URL's password, a token
// format), and the argument after a flag that names a secret (--api-key
// v, -token v) replaced whole, unless it is a variable reference (varRef:
// ${VAR}, $VAR), which holds no secret itself. It returns args itself when
// nothing changes.
func redactArgs(args []string) []string {
	var r redactor
	var out []string
	for i, a := range args {
		v := r.redactString(a)
		if i > 0 && secretFlag(args[i-1]) && a != "" && a[0] != '-' && !varRef([]byte(a)) {
			v = string(redactMarker([]byte(a)))
		}
		if v != a && out == nil {
			out = slices.Clone(args)
		}
		if out != nil {
			out[i] = v
		}
	}
	if out == nil {
		return args
	}
	return out
}

// secretFlag reports whether a is a flag without a value (-name or
// --name) whose name looks secret.
func secretFlag(a string) bool {
	name, ok := strings.CutPrefix(a, "-")
	name = strings.TrimPrefix(name, "-")
	return ok && name != "" && !strings.Contains(name, "=") && secretKeyName([]byte(name))
}

// redactString is redact for a string; it returns s itself when there is
// nothing to replace.
func (r redactor) redactString(s string) string {
	if s == "" {
		return s
	}
	b := []byte(s)
	if out := r.redact(b); len(out) != len(b) || &out[0] != &b[0] {
		return string(out)
	}
	return s
}

// asciiEscaped returns the JSON string body s with every non-ASCII
// character written as \uXXXX (lower-case hex, UTF-16 surrogate pairs
// past U+FFFF), or s itself when it is all ASCII.
func asciiEscaped(s []byte) string {
	if !slices.ContainsFunc(s, func(c byte) bool { return c >= utf8.RuneSelf }) {
		return string(s)
	}
	var out []byte
	for _, r := range string(s) {
		switch {
		case r < utf8.RuneSelf:
			out = append(out, byte(r))
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
		default:
			out = fmt.Appendf(out, `\u%04x`, r)
		}
	}
	return string(out)
}

// redactMarker returns the marker that stands in for v.
func redactMarker(v []byte) []byte {
	sum := sha256.Sum256(v)
	out := make([]byte, 0, len("[REDACTED sha256:12345678]"))
	out = append(out, "[REDACTED sha256:"...)
	out = hex.AppendEncode(out, sum[:4])
	return append(out, ']')
}

// redact returns b with every secret replaced. It returns b itself when
// there is nothing to replace.
func (r redactor) redact(b []byte) []byte {
	for i, s := range r.secrets {
		if containsFrom(b, s, r.anchors[i]) {
			b = bytes.ReplaceAll(b, s, redactMarker(s))
		}
	}
	return redactPatterns(b)
}

// byteRarity ranks bytes by how common they are in tool output (text,
// JSON, code), rarest 0: the byte of a secret to look for first.
var byteRarity = func() (t [256]uint8) {
	for c := range 256 {
		switch {
		case c >= 0x80 || c < 0x20 && c != '\n' && c != '\t' && c != '\r':
			t[c] = 0
		case strings.IndexByte("QZXJKV~^|`$@#%!&*;<>?[]{}+=", byte(c)) >= 0:
			t[c] = 1
		case c >= 'A' && c <= 'Z' || strings.IndexByte("qzxjkv", byte(c)) >= 0:
			t[c] = 2
		case c >= '0' && c <= '9' || strings.IndexByte("-_/:()'\\", byte(c)) >= 0:
			t[c] = 3
		case c >= 'a' && c <= 'z':
			t[c] = 4
		default: // space, newline, tab, quote, comma, dot
			t[c] = 5
		}
	}
	return t
}()

// anchorOf returns the offset of the rarest byte of s (the last of the
// rarest).
func anchorOf(s []byte) int {
	at := 0
	for i, c := range s {
		if byteRarity[c] <= byteRarity[s[at]] {
			at = i
		}
	}
	return at
}

// containsFrom reports whether b contains s (bytes.Contains), finding
// the candidates with bytes.IndexByte on s[at]: that byte being rare, it
// looks at few places. If the byte turns out common in b, it hands the
// rest of b to bytes.Contains.
func containsFrom(b, s []byte, at int) bool {
	if len(s) == 0 {
		return true
	}
	c, misses := s[at], 0
	for q := at; q < len(b); q++ {
		j := bytes.IndexByte(b[q:], c)
		if j < 0 {
			return false
		}
		q += j
		p := q - at // where s would start
		if p+len(s) > len(b) {
			return false
		}
		if string(b[p:p+len(s)]) == string(s) {
			return true
		}
		if misses++; misses > 8+q>>5 {
			return bytes.Contains(b[p+1:], s)
		}
	}
	return false
}

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
			for j < n && j-i < 20 && (b[j] >= 'A' && b[j] <= 'Z' || b[j] >= '0' && b[j] <= '9') {
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
	case clsColon:
		if i+1 < len(b) && b[i+1] == '/' {
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

// pemPrivateKey looks at the BEGIN of a PEM header at i ("-----BEGIN
// RSA PRIVATE KEY-----", OPENSSH, EC, ENCRYPTED, a PGP PRIVATE KEY BLOCK):
// for a private key it returns the span of the body, up to "-----END" (or
// maxPEM bytes, or the end of b: a cut key is still a key). The header
// and footer lines stay, so the journal shows what kind of key it was.
func pemPrivateKey(b []byte, i int) (span, bool) {
	head := i + len("BEGIN ")
	end := bytes.Index(b[head:min(len(b), head+64)], []byte("-----"))
	if end < 0 {
		return span{}, false
	}
	label := b[head : head+end]
	if !bytes.HasSuffix(label, []byte("PRIVATE KEY")) && !bytes.HasSuffix(label, []byte("PRIVATE KEY BLOCK")) {
		return span{}, false
	}
	body := head + end + len("-----")
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
	j := skipSpace(b, i+1)
	switch {
	case j < len(b) && (b[j] == '"' || b[j] == '\''):
		if end := bytes.IndexByte(b[j+1:min(len(b), j+1+maxAssigned)], b[j]); end >= 0 {
			return valueSpan(j+1, j+1+end)
		}
		return span{}, false
	case hasPrefixAt(b, j, `\"`):
		if end := bytes.Index(b[j+2:min(len(b), j+2+maxAssigned)], []byte(`\"`)); end >= 0 {
			return valueSpan(j+2, j+2+end)
		}
		return span{}, false
	}
	// A cookie header (Cookie: a=1; sid=v, Set-Cookie: sid=v; Path=/):
	// the rest of the line, every cookie in it.
	if b[i] == ':' && isCookieName(b[k:e]) {
		end := j
		for end < len(b) && end-j < maxAssigned && !lineEndsAt(b, end) {
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
	if len(v) == 0 || plainValue(v) {
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

// plainValue reports whether an unquoted value is a boolean, null or
// number, or a variable reference (${GITHUB_TOKEN}, $API_KEY): a setting
// or a name, not a secret (persist-credentials: false).
func plainValue(v []byte) bool {
	switch strings.ToLower(string(v)) {
	case "true", "false", "null", "nil", "none", "yes", "no", "on", "off", "~":
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
	return len(v) > 0
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

// secretValue looks at a quote at i: if it opens a key that looks secret
// (`"api_key": "v"`, or escaped inside a string, `\"api_key\": \"v\"`, at
// any depth of nesting: JSON in a string of JSON in a tool's text), it
// returns the span of the value's text.
func secretValue(b []byte, i int) (span, bool) {
	// The key: a short run of name characters, closed by the same quote.
	j := i + 1
	rare := false // the key holds a letter of secretKeyLetter
	for j < len(b) && j-i <= 64 && keyByte[b[j]] {
		rare = rare || secretKeyLetter[b[j]]
		j++
	}
	if j == i+1 || j >= len(b) || j-i > 64 || !rare { // !rare: see secretKeyName
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

func valueSpan(from, to int) (span, bool) {
	if to-from < 1 {
		return span{}, false // an empty value hides nothing
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

func hasPrefixAt(b []byte, i int, p string) bool {
	return len(b)-i >= len(p) && string(b[i:i+len(p)]) == p
}

func hasPrefixFold(b []byte, i int, p string) bool {
	if len(b)-i < len(p) {
		return false
	}
	for k := 0; k < len(p); k++ {
		c := b[i+k]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != p[k] {
			return false
		}
	}
	return true
}

// boundaryBefore reports whether b[i] starts a word: b[i-1] is not a
// token byte, or it ends a JSON escape that stands for one. The redactor
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

// secrets returns the resolved values that must never reach the journal:
// every header value (and, for "Bearer X"-style values, X alone), and the
// env values whose key names a secret or whose value looks like a token.
// Plain settings (LOG_LEVEL=debug, REGION=eu-west-1) are not secrets and
// would otherwise blank unrelated text in results.
func (s *ServerSpec) secrets() []string {
	var out []string
	for _, kv := range s.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && (secretKey(k) || tokenLike(v)) {
			out = append(out, v)
		}
	}
	for _, v := range s.Headers {
		out = append(out, v)
		if _, cred, ok := strings.Cut(v, " "); ok {
			out = append(out, cred)
		}
	}
	return out
}

var secretKeyParts = []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASS", "KEY", "AUTH", "CREDENTIAL", "COOKIE", "SESSION", "PRIVATE", "SIGNATURE"}

// secretKey reports whether an env key names a secret.
func secretKey(k string) bool {
	k = strings.ToUpper(k)
	for _, p := range secretKeyParts {
		if strings.Contains(k, p) {
			return true
		}
	}
	return false
}

// tokenLike reports whether v looks like a credential: long, one word, and
// mixing letters and digits.
func tokenLike(v string) bool {
	if len(v) < 16 || strings.ContainsAny(v, " /\\") {
		return false
	}
	var letters, digits bool
	for _, r := range v {
		switch {
		case r >= '0' && r <= '9':
			digits = true
		case r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z':
			letters = true
		}
	}
	return letters && digits
}
