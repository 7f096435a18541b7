package guard

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/mcpledger/mcpledger/events"
)

// minSecretLen is the shortest resolved value treated as a secret: shorter
// values (ports, "1", "true") would redact unrelated text.
const minSecretLen = 6

// Redactor rewrites text bound for the journal (a call's arguments and
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
// A Redactor is immutable and safe for concurrent use.
type Redactor struct {
	secrets [][]byte
	anchors []int // per secret, the offset of its rarest byte (anchorOf)
}

// NewRedactor returns a Redactor that also replaces each of secrets (see
// Secrets) wherever it appears; secrets shorter than minSecretLen bytes
// are ignored, since they would blank unrelated text.
func NewRedactor(secrets []string) Redactor {
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
		// <, >, & and control characters escaped; a string always
		// marshals).
		b, _ := json.Marshal(v)
		add(string(b[1 : len(b)-1]))
		// As servers that escape every non-ASCII character write it
		// (Python's json.dumps): the journal keeps their own bytes.
		add(asciiEscaped(b[1 : len(b)-1]))
	}
	// Longest first, so a secret containing another is replaced whole.
	slices.SortFunc(s, func(a, b []byte) int { return len(b) - len(a) })
	r := Redactor{secrets: s, anchors: make([]int, len(s))}
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
func (r Redactor) Scrub(p events.Payload) {
	switch p := p.(type) {
	case *events.ProcessExited:
		for i, l := range p.StderrTail {
			p.StderrTail[i] = r.RedactString(l)
		}
	case *events.OutputSkipped:
		p.Line = r.RedactString(p.Line)
	case *events.ConnectFailed:
		p.Error.Message = r.RedactString(p.Error.Message)
	case *events.TransportClosed:
		p.Error.Message = r.RedactString(p.Error.Message)
	case *events.PingFailed:
		p.Error = r.RedactString(p.Error)
	case *events.ResourcesListed:
		p.Error = r.RedactString(p.Error)
	case *events.PromptsListed:
		p.Error = r.RedactString(p.Error)
	case *events.HandshakeCompleted:
		p.Instructions = r.RedactString(p.Instructions)
	case *events.AuthFailed:
		p.Error = r.RedactString(p.Error)
	case *events.AuthSignedOut:
		p.RevokeError = r.RedactString(p.RevokeError)
	}
}

// RedactArgs returns a stdio server's args as journaled: every credential
// the patterns find replaced (--password=v, a URL's password, a token
// format), and the argument after a flag that names a secret (--api-key
// v, -token v) replaced whole, unless it is a variable reference (varRef:
// ${VAR}, $VAR), which holds no secret itself. It returns args itself when
// nothing changes.
func RedactArgs(args []string) []string {
	var r Redactor
	var out []string
	for i, a := range args {
		v := r.RedactString(a)
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
func (r Redactor) RedactString(s string) string {
	if s == "" {
		return s
	}
	b := []byte(s)
	if out := r.Redact(b); len(out) != len(b) || &out[0] != &b[0] {
		return string(out)
	}
	return s
}

// asciiEscaped returns the JSON string body s with every non-ASCII
// character written as \uXXXX (lower-case hex, UTF-16 surrogate pairs
// past U+FFFF): s itself when it is all ASCII.
func asciiEscaped(s []byte) string {
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
func (r Redactor) Redact(b []byte) []byte {
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
	if len(s) > len(b) {
		return false
	}
	// q <= len(b) throughout (at < len(s) <= len(b)), and at len(b)
	// IndexByte finds nothing.
	c, misses := s[at], 0
	for q := at; ; q++ {
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
}
