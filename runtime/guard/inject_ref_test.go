package guard

// The detector as it was before the single-pass rewrite (commit 9b798f9),
// kept verbatim (identifiers prefixed "ref") as the reference that
// TestDetectInjectionDifferential and FuzzDetectInjectionDifferential
// compare DetectInjection with: 13 bytes.Index passes over a lower-cased
// copy, then a separate base64 run scan. It shares only the Signal*
// names, the base64 bounds and isAlnum/byteWords with the package.

import (
	"bytes"
	"encoding/base64"
	"slices"
)

// refDetectInjection returns the names of the prompt-injection patterns
// found in text, sorted and without duplicates, or nil. It is advisory
// (seed 001): it never blocks a call or changes its output, so it favours
// patterns that are rare in legitimate output (see inject_test.go and
// testdata/outputs for the false positives it is checked against).
func refDetectInjection(text string) []string {
	var d refDetector
	d.scan([]byte(text), "")
	d.base64([]byte(text))
	if len(d.found) == 0 {
		return nil
	}
	slices.Sort(d.found)
	return slices.Compact(d.found)
}

type refDetector struct {
	found   []string
	lower   []byte
	decoded int
}

func (d *refDetector) hit(prefix, name string) { d.found = append(d.found, prefix+name) }

// scan looks for every pattern but base64 in b; prefix qualifies names.
func (d *refDetector) scan(b []byte, prefix string) {
	d.unicode(b, prefix)
	d.lower = refAsciiLower(d.lower[:0], b)
	l := d.lower
	d.templates(l, prefix)
	d.roles(l, prefix)
	d.phrases(l, prefix)
	if bytes.Contains(l, []byte("<mcp_tool_output")) || bytes.Contains(l, []byte("</mcp_tool_output")) {
		d.hit(prefix, SignalBoundaryEscape)
	}
}

var refLowerTable = func() (t [256]byte) {
	for i := range t {
		t[i] = byte(i)
		if i >= 'A' && i <= 'Z' {
			t[i] = byte(i) + 'a' - 'A'
		}
	}
	return t
}()

func refAsciiLower(dst, b []byte) []byte {
	dst = slices.Grow(dst[:0], len(b))[:len(b)]
	for i, c := range b {
		dst[i] = refLowerTable[c]
	}
	return dst
}

// unicode finds tag characters (F3 A0 80 80 – F3 A0 81 BF) and bidi
// controls (E2 80 AA–AE, E2 81 A6–A9).
func (d *refDetector) unicode(b []byte, prefix string) {
	var tag, bidi bool
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], 0xf3)
		if j < 0 {
			break
		}
		i += j + 1
		if i+2 < len(b) && b[i] == 0xa0 && (b[i+1] == 0x80 || b[i+1] == 0x81) {
			tag = true
			break
		}
	}
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], 0xe2)
		if j < 0 {
			break
		}
		i += j + 1
		if i+1 < len(b) && (b[i] == 0x80 && b[i+1] >= 0xaa && b[i+1] <= 0xae || b[i] == 0x81 && b[i+1] >= 0xa6 && b[i+1] <= 0xa9) {
			bidi = true
			break
		}
	}
	if tag {
		d.hit(prefix, SignalUnicodeTag)
	}
	if bidi {
		d.hit(prefix, SignalUnicodeBidi)
	}
}

var refTemplateTokens = []struct{ token, name string }{
	{"<|im_start|>", SignalTemplateChatML}, {"<|im_end|>", SignalTemplateChatML},
	{"<|im_sep|>", SignalTemplateChatML}, {"<|system|>", SignalTemplateChatML},
	{"<|user|>", SignalTemplateChatML}, {"<|assistant|>", SignalTemplateChatML},
	{"<|endoftext|>", SignalTemplateChatML}, {"<|end|>", SignalTemplateChatML},
	{"[inst]", SignalTemplateLlama}, {"[/inst]", SignalTemplateLlama},
	{"<<sys>>", SignalTemplateLlama}, {"<</sys>>", SignalTemplateLlama},
	{"<|begin_of_text|>", SignalTemplateLlama}, {"<|start_header_id|>", SignalTemplateLlama},
	{"<|end_header_id|>", SignalTemplateLlama}, {"<|eot_id|>", SignalTemplateLlama},
	{"<start_of_turn>", SignalTemplateGemma}, {"<end_of_turn>", SignalTemplateGemma},
}

var refTemplateTokensB = func() [][]byte {
	out := make([][]byte, len(refTemplateTokens))
	for i, t := range refTemplateTokens {
		out[i] = []byte(t.token)
	}
	return out
}()

// templates finds chat-template control tokens (l is lowercased).
func (d *refDetector) templates(l []byte, prefix string) {
	hasPipe := bytes.Contains(l, []byte("<|"))
	hasBracket := bytes.Contains(l, []byte("[inst]")) || bytes.Contains(l, []byte("[/inst]"))
	hasAngle := bytes.Contains(l, []byte("<<sys>>")) || bytes.Contains(l, []byte("<</sys>>")) ||
		bytes.Contains(l, []byte("_of_turn>"))
	if !hasPipe && !hasBracket && !hasAngle {
		return
	}
	for i, t := range refTemplateTokens {
		if bytes.Contains(l, refTemplateTokensB[i]) {
			d.hit(prefix, t.name)
		}
	}
}

// roles finds lines that start like a chat transcript's role marker:
// optional indentation, markdown (#, *, >), then "system:" or
// "assistant:" (any case), then a space or the end of the line.
func (d *refDetector) roles(l []byte, prefix string) {
	var sys, asst bool
	for start := 0; start < len(l) && !(sys && asst); {
		end := bytes.IndexByte(l[start:], '\n')
		if end < 0 {
			end = len(l)
		} else {
			end += start
		}
		line := l[start:end]
		i := 0
		for i < len(line) && i < 16 && (line[i] == ' ' || line[i] == '\t' || line[i] == '#' || line[i] == '*' || line[i] == '>' || line[i] == '\r') {
			i++
		}
		rest := line[i:]
		switch {
		case refRoleAt(rest, "system"):
			sys = true
		case refRoleAt(rest, "assistant"):
			asst = true
		}
		start = end + 1
	}
	if sys {
		d.hit(prefix, SignalRoleSystem)
	}
	if asst {
		d.hit(prefix, SignalRoleAssistant)
	}
}

func refRoleAt(rest []byte, role string) bool {
	if !bytes.HasPrefix(rest, []byte(role)) {
		return false
	}
	r := rest[len(role):]
	for len(r) > 0 && r[0] == '*' { // **System**:
		r = r[1:]
	}
	return len(r) > 0 && r[0] == ':' && (len(r) == 1 || r[1] == ' ' || r[1] == '\t' || r[1] == '\r')
}

// Words of the ignore-instructions phrase.
var (
	refIgnoreVerbs   = []string{"ignore", "disregard", "forget", "override", "bypass"}
	refIgnoreTargets = []string{"instructions", "instruction", "prompts", "prompt", "directions", "directives",
		"guidelines", "rules", "context", "messages", "commands"}
	refIgnoreQualifiers = []string{"previous", "prior", "above", "earlier", "preceding", "foregoing", "all",
		"any", "your", "system", "initial", "original", "those", "these"}
	refHidePhrases = []string{"do not tell the user", "don't tell the user", "dont tell the user",
		"without telling the user", "do not inform the user", "do not mention this to the user",
		"don't mention this to the user", "hide this from the user", "the user must not know",
		"do not reveal this to the user"}
	refPromptVerbs = []string{"reveal", "print", "show", "output", "repeat", "leak", "disclose", "display", "dump"}
)

var refIgnoreVerbsB, refHidePhrasesB, refPromptVerbsB = byteWords(refIgnoreVerbs), byteWords(refHidePhrases), byteWords(refPromptVerbs)

// phrases finds the instruction phrases (l is lowercased).
func (d *refDetector) phrases(l []byte, prefix string) {
	if refIgnorePhrase(l) {
		d.hit(prefix, SignalIgnoreInstructions)
	}
	if i := bytes.Index(l, []byte("new instructions")); i >= 0 {
		after := l[i+len("new instructions"):]
		before := l[max(0, i-12):i]
		if bytes.HasPrefix(bytes.TrimLeft(after, " "), []byte(":")) || bytes.Contains(before, []byte("your ")) ||
			bytes.Contains(before, []byte("following ")) {
			d.hit(prefix, SignalNewInstructions)
		}
	}
	for off := 0; ; {
		i := bytes.Index(l[off:], []byte("system prompt"))
		if i < 0 {
			break
		}
		i += off
		off = i + 1
		before := l[max(0, i-32):i]
		if refContainsAny(before, refPromptVerbsB) && (bytes.Contains(before, []byte("your")) || bytes.Contains(before, []byte("the"))) {
			d.hit(prefix, SignalSystemPrompt)
			break
		}
	}
	if bytes.Contains(l, []byte("the user")) {
		for _, p := range refHidePhrasesB {
			if bytes.Contains(l, p) {
				d.hit(prefix, SignalHideFromUser)
				break
			}
		}
	}
}

// refIgnorePhrase reports whether l (lowercased) holds an ignore verb
// followed by a phrase naming earlier instructions.
func refIgnorePhrase(l []byte) bool {
	for _, v := range refIgnoreVerbsB {
		for off := 0; ; {
			i := bytes.Index(l[off:], v)
			if i < 0 {
				break
			}
			i += off
			off = i + len(v)
			if i > 0 && isAlnum(l[i-1]) {
				continue
			}
			if refIgnorePhraseAt(l[off:]) {
				return true
			}
		}
	}
	return false
}

// refIgnorePhraseAt reports whether the words after an ignore verb name
// earlier instructions: within six words, a target ("instructions",
// "rules", …) and a qualifier ("previous", "all", "your", …).
func refIgnorePhraseAt(after []byte) bool {
	var target, qual bool
	words := 0
	for i := 0; i < len(after) && words < 7; {
		for i < len(after) && !isAlnum(after[i]) && after[i] != '\'' {
			if after[i] == '.' || after[i] == '\n' || after[i] == ';' {
				return false // the sentence ended
			}
			i++
		}
		j := i
		for j < len(after) && (isAlnum(after[j]) || after[j] == '\'') {
			j++
		}
		if j == i {
			break
		}
		w := string(after[i:j])
		words++
		if slices.Contains(refIgnoreTargets, w) {
			target = true
		}
		if slices.Contains(refIgnoreQualifiers, w) {
			qual = true
		}
		if target && qual {
			return true
		}
		i = j
	}
	return false
}

func refContainsAny(b []byte, words [][]byte) bool {
	for _, w := range words {
		if bytes.Contains(b, w) {
			return true
		}
	}
	return false
}

// base64 decodes long runs of base64 characters and scans what decodes
// to mostly printable text.
func (d *refDetector) base64(b []byte) {
	for i := 0; i < len(b) && d.decoded < maxBase64Total; {
		for i < len(b) && !refB64Table[b[i]] {
			i++
		}
		j := i
		for j < len(b) && refB64Table[b[j]] {
			j++
		}
		if j-i >= minBase64Run {
			d.tryDecode(b[i:j])
		}
		i = j
	}
}

var refB64Table = func() (t [256]bool) {
	for c := range 256 {
		t[c] = isAlnum(byte(c)) || c == '+' || c == '/' || c == '=' || c == '-' || c == '_'
	}
	return t
}()

func (d *refDetector) tryDecode(run []byte) {
	run = run[:min(len(run), maxBase64Decode*4/3)]
	run = run[:len(run)/4*4]
	trimmed := bytes.TrimRight(run, "=")
	var out []byte
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		buf := make([]byte, enc.DecodedLen(len(trimmed)))
		if n, err := enc.Decode(buf, trimmed); err == nil {
			out = buf[:n]
			break
		}
	}
	if len(out) == 0 {
		return
	}
	d.decoded += len(out)
	printable := 0
	for _, c := range out {
		if c >= 0x20 && c < 0x7f || c == '\n' || c == '\t' || c == '\r' || c >= 0x80 {
			printable++
		}
	}
	if printable*10 < len(out)*9 {
		return // binary (an image, say)
	}
	inner := refDetector{lower: d.lower[:0]}
	inner.scan(out, "base64:")
	d.found = append(d.found, inner.found...)
}
