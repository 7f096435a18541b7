package runtime

import (
	"bytes"
	"encoding/base64"
	"math/bits"
	"slices"
	"strings"
)

// Injection signal names (CallFinished.Signals). A base64 blob that
// decodes to a match is reported as "base64:" + the inner name.
const (
	SignalIgnoreInstructions = "phrase:ignore_instructions" // ignore/disregard/forget … previous instructions
	SignalNewInstructions    = "phrase:new_instructions"    // "your new instructions", "new instructions:"
	SignalSystemPrompt       = "phrase:system_prompt"       // reveal/print/repeat … your system prompt
	SignalHideFromUser       = "phrase:hide_from_user"      // do not tell the user …
	SignalRoleSystem         = "role:system"                // a line starting "SYSTEM:" (or "### System:")
	SignalRoleAssistant      = "role:assistant"             // a line starting "assistant:"
	SignalTemplateChatML     = "template:chatml"            // <|im_start|>, <|im_end|>, <|system|>, <|endoftext|> …
	SignalTemplateLlama      = "template:llama"             // [INST], <<SYS>>, <|start_header_id|>, <|eot_id|> …
	SignalTemplateGemma      = "template:gemma"             // <start_of_turn>, <end_of_turn>
	SignalUnicodeTag         = "unicode:tag"                // U+E0000–U+E007F: invisible ASCII
	SignalUnicodeBidi        = "unicode:bidi"               // U+202A–U+202E, U+2066–U+2069
	SignalBoundaryEscape     = "boundary:escape"            // an <mcp_tool_output> tag inside the output
)

// Bounds of the base64 pass: runs shorter than minBase64Run are not
// examined, each run is decoded up to maxBase64Decode bytes, and one
// scan decodes at most maxBase64Total bytes in all.
const (
	minBase64Run    = 24
	maxBase64Decode = 16 << 10
	maxBase64Total  = 256 << 10
)

// DetectInjection returns the names of the prompt-injection patterns
// found in text, sorted and without duplicates, or nil. It is advisory
// (seed 001): it never blocks a call or changes its output, so it favours
// patterns that are rare in legitimate output (see inject_test.go and
// testdata/outputs for the false positives it is checked against).
//
// It reads text once, in place (no lower-cased copy): a table of byte
// pairs marks, 64 bytes at a time and without a branch per byte, the only
// places where a pattern can start (detectMask): '\n' (a role marker on
// the next line), '<' and '[' (template tokens, boundary tags), the lead
// byte of a tag or bidi character, and the first two letters, in any
// case, of an ignore verb or of the word after the space of "new
// instructions", "system prompt" and "the user". Only there does it
// compare, ASCII case-insensitively. The same pass marks the blocks of 8
// bytes that may be base64, and a run of at least minBase64Run bytes
// holds two in a row. inject_ref_test.go keeps the former implementation
// (a dozen bytes.Index passes over a lower-cased copy, then a base64
// pass) and the differential tests hold the two to the same answers.
func DetectInjection(text string) []string {
	var d detector
	d.scan(text, true)
	if d.flags == 0 && len(d.inner) == 0 {
		return nil
	}
	found := d.names(d.inner, "")
	slices.Sort(found)
	return slices.Compact(found)
}

// Signal bits of one scan, in the order of signalNames.
const (
	fIgnore uint16 = 1 << iota
	fNewInstructions
	fSystemPrompt
	fHideFromUser
	fRoleSystem
	fRoleAssistant
	fChatML
	fLlama
	fGemma
	fUnicodeTag
	fUnicodeBidi
	fBoundary
)

var signalNames = [...]string{SignalIgnoreInstructions, SignalNewInstructions, SignalSystemPrompt,
	SignalHideFromUser, SignalRoleSystem, SignalRoleAssistant, SignalTemplateChatML, SignalTemplateLlama,
	SignalTemplateGemma, SignalUnicodeTag, SignalUnicodeBidi, SignalBoundaryEscape}

type detector struct {
	flags   uint16
	newSeen bool     // the first "new instructions" has been judged
	inner   []string // signals found in base64 blobs, prefixed
	decoded int      // bytes decoded from base64 so far
	b64Done int      // the base64 runs before this offset were handled
	src     []byte   // the base64 run being decoded
	buf     []byte   // its decoding
}

// names appends the names of d's signals, each with prefix, to dst.
func (d *detector) names(dst []string, prefix string) []string {
	for i, name := range signalNames {
		if d.flags&(1<<i) != 0 {
			dst = append(dst, prefix+name)
		}
	}
	return dst
}

// The first two letters (any case) of the words that anchor a phrase:
// an ignore verb at the start of a word (ig, di, fo, ov, by), the second
// word of "new instructions", "system prompt" and "the user" after a
// space (in, pr, us). A bit per pair; next1[c] holds the pairs that start
// with c, next2[c] those whose second letter is c.
const (
	nVerb  = 0b00011111
	nSpace = 0b11100000
)

var next1, next2 = func() (t1, t2 [256]uint8) {
	for i, p := range []string{"ig", "di", "fo", "ov", "by", "in", "pr", "us"} {
		t1[p[0]] |= 1 << i
		t1[p[0]-'a'+'A'] |= 1 << i
		t2[p[1]] |= 1 << i
		t2[p[1]-'a'+'A'] |= 1 << i
	}
	return
}()

// isSpecial marks the bytes that start a pattern whatever follows them:
// '\n' (a role marker on the next line), '<' and '[' (template tokens,
// boundary tags), 0xE2 (bidi controls) and 0xF3 (tag characters).
var isSpecial = func() (t [256]bool) {
	for _, c := range []byte{'\n', '<', '[', 0xe2, 0xf3} {
		t[c] = true
	}
	return t
}()

// detectPairs[c0 | c1<<8] is 1 when something may start at c0 followed
// by c1: c0 special, or c0 c1 one of the anchor pairs of next1/next2.
var detectPairs = func() (t [1 << 16]uint8) {
	for c0 := range 256 {
		for c1 := range 256 {
			if isSpecial[c0] || next1[c0]&next2[c1] != 0 {
				t[c0|c1<<8] = 1
			}
		}
	}
	return t
}()

// detectMask returns a mask of the places in s[base:base+64] (base a
// multiple of 64) where the pair of bytes is in detectPairs: bit j for
// s[base+j], one table look-up per byte. It also returns a bit per whole
// block of 8 bytes, bit q for s[base+8q:base+8q+8], set when all 8 bytes
// are in ['+', 'z'] and so may all be base64 run bytes.
func detectMask(s string, base int) (m uint64, maybeB64 uint8) {
	k := 0
	for ; k < 64 && base+k+9 <= len(s); k += 8 {
		x, y := load64(s, base+k), load64(s, base+k+1)
		v := uint64(detectPairs[uint16(x)]) |
			uint64(detectPairs[uint16(x>>8)])<<1 |
			uint64(detectPairs[uint16(x>>16)])<<2 |
			uint64(detectPairs[uint16(x>>24)])<<3 |
			uint64(detectPairs[uint16(x>>32)])<<4 |
			uint64(detectPairs[uint16(x>>40)])<<5 |
			uint64(detectPairs[uint16(x>>48)])<<6 |
			uint64(detectPairs[uint16(y>>48)])<<7
		m |= v << k
		maybeB64 |= inB64Range(x) << (k >> 3)
	}
	if k < 64 && base+k+8 == len(s) { // the last whole block
		maybeB64 |= inB64Range(load64(s, base+k)) << (k >> 3)
	}
	for ; k < 64 && base+k+1 < len(s); k++ { // the last byte starts nothing
		m |= uint64(detectPairs[uint16(s[base+k])|uint16(s[base+k+1])<<8]) << k
	}
	return m, maybeB64
}

// inB64Range returns 1 if the 8 bytes of x are all in ['+', 'z'] (a
// superset of the base64 run bytes), else 0, without a branch.
func inB64Range(x uint64) uint8 {
	y := x &^ swarHigh
	var r uint8
	if (y+(0x80-'+')*swarOnes)&^(y+(0x7f-'z')*swarOnes)&^x&swarHigh == swarHigh {
		r = 1 // compiled to a SETEQ
	}
	return r
}

// b64Table marks the bytes of a base64 run (standard and URL alphabets,
// and padding).
var b64Table = func() (t [256]bool) {
	for c := range 256 {
		t[c] = isAlnum(byte(c)) || c == '+' || c == '/' || c == '=' || c == '-' || c == '_'
	}
	return t
}()

var lowerTable = func() (t [256]byte) {
	for i := range t {
		t[i] = byte(i)
		if i >= 'A' && i <= 'Z' {
			t[i] = byte(i) + 'a' - 'A'
		}
	}
	return t
}()

// hasFold reports whether s[i:] starts with p (lower case), ASCII case
// insensitively. i may be negative.
func hasFold(s string, i int, p string) bool {
	if i < 0 || len(s)-i < len(p) {
		return false
	}
	s = s[i : i+len(p)]
	for k := 0; k < len(p); k++ {
		if lowerTable[s[k]] != p[k] {
			return false
		}
	}
	return true
}

// lowerInto writes s lower-cased to buf (at least as long) and returns it.
func lowerInto(buf []byte, s string) []byte {
	buf = buf[:len(s)]
	for i := range buf {
		buf[i] = lowerTable[s[i]]
	}
	return buf
}

// scan looks for every pattern in s, and with b64 also decodes its long
// base64 runs and scans what they hold.
func (d *detector) scan(s string, b64 bool) {
	n := len(s)
	if n == 0 {
		return
	}
	d.lineStart(s, 0)
	var lastB64 uint8 // the last block of the previous 64 bytes may be base64
	for base := 0; base < n; base += 64 {
		m, maybeB64 := detectMask(s, base)
		if b64 && maybeB64 != 0 {
			// A run of 24 base64 bytes holds two whole blocks of 8 in a
			// row: look where two such blocks may stand.
			pairs := maybeB64 & (maybeB64 >> 1) // blocks q and q+1
			if maybeB64&1 != 0 && lastB64 != 0 {
				d.base64At(s, base-8)
			}
			for ; pairs != 0; pairs &= pairs - 1 {
				d.base64At(s, base+8*bits.TrailingZeros8(pairs))
			}
		}
		lastB64 = maybeB64 >> 7
		for ; m != 0; m &= m - 1 {
			p := base + bits.TrailingZeros64(m)
			c := s[p]
			if isSpecial[c] {
				d.special(s, p, c)
				continue
			}
			// An anchor pair at p, p+1.
			pair := next1[c] & next2[s[p+1]]
			if pair&nVerb != 0 && (p == 0 || !isAlnum(s[p-1])) {
				d.verb(s, p)
			}
			if pair&nSpace != 0 && p > 0 && s[p-1] == ' ' {
				d.spaced(s, p-1)
			}
		}
	}
}

// base64At looks at the blocks s[at:at+8] and s[at+8:at+16]: if both are
// all base64 run bytes (b64Mask) and their run (at least minBase64Run
// bytes) was not handled yet, it decodes it. The runs are met in order,
// and decoded while fewer than maxBase64Total bytes have been.
func (d *detector) base64At(s string, at int) {
	if at < d.b64Done || d.decoded >= maxBase64Total ||
		b64Mask(load64(s, at)) != swarHigh || b64Mask(load64(s, at+8)) != swarHigh {
		return
	}
	from, to := at, at+16
	for from >= 8 { // from stays a multiple of 8 until the run's start
		m := b64Mask(load64(s, from-8))
		from -= bits.LeadingZeros64(^m&swarHigh) >> 3
		if m != swarHigh {
			break
		}
	}
	for to+8 <= len(s) {
		m := b64Mask(load64(s, to))
		to += bits.TrailingZeros64(^m&swarHigh) >> 3
		if m != swarHigh {
			break
		}
	}
	for to < len(s) && to+8 > len(s) && b64Table[s[to]] {
		to++
	}
	if to-from >= minBase64Run {
		d.tryDecode(s[from:to])
	}
	d.b64Done = to
}

// b64Mask sets the high bit of each byte of x that is a base64 run byte
// (b64Table): in ['+', 'z'], and none of , . : ; < > ? @ [ \ ] ^ `.
func b64Mask(x uint64) uint64 {
	const ones = swarOnes
	y := x &^ swarHigh
	// A byte v < 0x80 is in [lo, hi] when v+0x80-lo has its high bit set
	// and v+0x7f-hi has not.
	m := (y + (0x80-'+')*ones) &^ (y + (0x7f-'z')*ones) &^ x & swarHigh
	if m == 0 {
		return 0 // the common case, cheaply
	}
	bad := (y+(0x80-':')*ones)&^(y+(0x7f-'<')*ones) | (y+(0x80-'>')*ones)&^(y+(0x7f-'@')*ones) |
		(y+(0x80-'[')*ones)&^(y+(0x7f-'^')*ones) | swarEq(x, ',') | swarEq(x, '.') | swarEq(x, '`')
	return m &^ bad
}

// special checks what starts at a special byte (isSpecial).
func (d *detector) special(s string, i int, c byte) {
	switch c {
	case '\n':
		d.lineStart(s, i+1)
	case '<':
		d.angle(s, i)
	case '[':
		if hasFold(s, i, "[inst]") || hasFold(s, i, "[/inst]") {
			d.flags |= fLlama
		}
	case 0xe2: // bidi controls: E2 80 AA–AE, E2 81 A6–A9
		if i+2 < len(s) && (s[i+1] == 0x80 && s[i+2] >= 0xaa && s[i+2] <= 0xae ||
			s[i+1] == 0x81 && s[i+2] >= 0xa6 && s[i+2] <= 0xa9) {
			d.flags |= fUnicodeBidi
		}
	case 0xf3: // tag characters: F3 A0 80 80 – F3 A0 81 BF
		if i+3 < len(s) && s[i+1] == 0xa0 && (s[i+2] == 0x80 || s[i+2] == 0x81) {
			d.flags |= fUnicodeTag
		}
	}
}

// Template tokens that start "<|".
var pipeTokens = []struct {
	token string
	flag  uint16
}{
	{"<|im_start|>", fChatML}, {"<|im_end|>", fChatML}, {"<|im_sep|>", fChatML}, {"<|system|>", fChatML},
	{"<|user|>", fChatML}, {"<|assistant|>", fChatML}, {"<|endoftext|>", fChatML}, {"<|end|>", fChatML},
	{"<|begin_of_text|>", fLlama}, {"<|start_header_id|>", fLlama}, {"<|end_header_id|>", fLlama},
	{"<|eot_id|>", fLlama},
}

// angle checks the chat-template tokens and boundary tags at s[i] == '<':
// ChatML <|im_start|> <|im_end|> <|im_sep|> <|system|> <|user|>
// <|assistant|> <|endoftext|> <|end|>; Llama <<SYS>> <</SYS>>
// <|begin_of_text|> <|start_header_id|> <|end_header_id|> <|eot_id|>
// (and [INST] [/INST], at '['); Gemma <start_of_turn> <end_of_turn>;
// <mcp_tool_output and </mcp_tool_output.
func (d *detector) angle(s string, i int) {
	if i+1 >= len(s) {
		return
	}
	switch lowerTable[s[i+1]] {
	case '|':
		for _, t := range pipeTokens {
			if d.flags&t.flag == 0 && hasFold(s, i, t.token) {
				d.flags |= t.flag
			}
		}
	case '<':
		if hasFold(s, i, "<<sys>>") || hasFold(s, i, "<</sys>>") {
			d.flags |= fLlama
		}
	case 's':
		if hasFold(s, i, "<start_of_turn>") {
			d.flags |= fGemma
		}
	case 'e':
		if hasFold(s, i, "<end_of_turn>") {
			d.flags |= fGemma
		}
	case 'm':
		if hasFold(s, i, "<mcp_tool_output") {
			d.flags |= fBoundary
		}
	case '/':
		if hasFold(s, i, "</mcp_tool_output") {
			d.flags |= fBoundary
		}
	}
}

// lineStart checks whether the line at s[p:] starts like a chat
// transcript's role marker: optional indentation and markdown (up to 16
// of space, tab, #, *, >, CR), then "system" or "assistant" (any case),
// any '*' ("**System**:"), then ':' and a space, tab, CR or the end of
// the line.
func (d *detector) lineStart(s string, p int) {
	if d.flags&(fRoleSystem|fRoleAssistant) == fRoleSystem|fRoleAssistant {
		return
	}
	i := p
	for i < len(s) && i-p < 16 {
		if c := s[i]; c != ' ' && c != '\t' && c != '#' && c != '*' && c != '>' && c != '\r' {
			break
		}
		i++
	}
	switch {
	case hasFold(s, i, "system"):
		if roleEnd(s, i+len("system")) {
			d.flags |= fRoleSystem
		}
	case hasFold(s, i, "assistant"):
		if roleEnd(s, i+len("assistant")) {
			d.flags |= fRoleAssistant
		}
	}
}

func roleEnd(s string, j int) bool {
	for j < len(s) && s[j] == '*' { // **System**:
		j++
	}
	if j >= len(s) || s[j] != ':' {
		return false
	}
	j++
	return j == len(s) || s[j] == '\n' || s[j] == ' ' || s[j] == '\t' || s[j] == '\r'
}

// Words of the ignore-instructions phrase.
var (
	ignoreTargets = []string{"instructions", "instruction", "prompts", "prompt", "directions", "directives",
		"guidelines", "rules", "context", "messages", "commands"}
	ignoreQualifiers = []string{"previous", "prior", "above", "earlier", "preceding", "foregoing", "all",
		"any", "your", "system", "initial", "original", "those", "these"}
	hidePhrases = []string{"do not tell the user", "don't tell the user", "dont tell the user",
		"without telling the user", "do not inform the user", "do not mention this to the user",
		"don't mention this to the user", "hide this from the user", "the user must not know",
		"do not reveal this to the user"}
	promptVerbs = []string{"reveal", "print", "show", "output", "repeat", "leak", "disclose", "display", "dump"}
)

// ignoreWords: 1 for a target, 2 for a qualifier; maxIgnoreWord is the
// longest of them.
var ignoreWords, maxIgnoreWord = func() (map[string]uint8, int) {
	m, longest := map[string]uint8{}, 0
	for _, w := range ignoreTargets {
		m[w] |= 1
		longest = max(longest, len(w))
	}
	for _, w := range ignoreQualifiers {
		m[w] |= 2
		longest = max(longest, len(w))
	}
	return m, longest
}()

// hideAt holds each hide phrase and where "the user" sits in it (every
// one holds it once), so that an occurrence of "the user" tells where a
// phrase would start.
var hideAt = func() (out []struct {
	phrase string
	at     int
}) {
	for _, p := range hidePhrases {
		out = append(out, struct {
			phrase string
			at     int
		}{p, strings.Index(p, "the user")})
	}
	return out
}()

var promptVerbsB = byteWords(promptVerbs)

// verb checks for an ignore verb (ignore, disregard, forget, override,
// bypass) at the start of a word, s[p], followed by a phrase naming
// earlier instructions.
func (d *detector) verb(s string, p int) {
	if d.flags&fIgnore != 0 {
		return
	}
	var v string
	switch lowerTable[s[p]] {
	case 'i':
		v = "ignore"
	case 'd':
		v = "disregard"
	case 'f':
		v = "forget"
	case 'o':
		v = "override"
	case 'b':
		v = "bypass"
	}
	if hasFold(s, p, v) && ignorePhraseAt(s[p+len(v):]) {
		d.flags |= fIgnore
	}
}

// ignorePhraseAt reports whether the words after an ignore verb name
// earlier instructions: within seven words, before the sentence ends, a
// target ("instructions", "rules", …) and a qualifier ("previous",
// "all", "your", …).
func ignorePhraseAt(after string) bool {
	var seen uint8
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
		words++
		if j-i <= maxIgnoreWord {
			var buf [16]byte
			seen |= ignoreWords[string(lowerInto(buf[:], after[i:j]))]
			if seen == 3 {
				return true
			}
		}
		i = j
	}
	return false
}

// spaced checks the phrases anchored at their space, s[i] == ' ':
// "new instructions" (the first occurrence only, followed by ':' or
// after "your"/"following"), "system prompt" (after a verb such as
// reveal or print and "your" or "the", within 32 bytes), and the hide
// phrases, which all hold "the user".
func (d *detector) spaced(s string, i int) {
	var buf [32]byte
	switch lowerTable[s[i+1]] {
	case 'i':
		if d.newSeen || !hasFold(s, i-3, "new") || !hasFold(s, i+1, "instructions") {
			return
		}
		d.newSeen = true
		o := i - 3
		after := strings.TrimLeft(s[o+len("new instructions"):], " ")
		before := lowerInto(buf[:], s[max(0, o-12):o])
		if strings.HasPrefix(after, ":") || bytes.Contains(before, []byte("your ")) ||
			bytes.Contains(before, []byte("following ")) {
			d.flags |= fNewInstructions
		}
	case 'p':
		if d.flags&fSystemPrompt != 0 || !hasFold(s, i-6, "system") || !hasFold(s, i+1, "prompt") {
			return
		}
		o := i - 6
		before := lowerInto(buf[:], s[max(0, o-32):o])
		if containsAny(before, promptVerbsB) && (bytes.Contains(before, []byte("your")) || bytes.Contains(before, []byte("the"))) {
			d.flags |= fSystemPrompt
		}
	case 'u':
		if d.flags&fHideFromUser != 0 || !hasFold(s, i-3, "the") || !hasFold(s, i+1, "user") {
			return
		}
		for _, h := range hideAt {
			if hasFold(s, i-3-h.at, h.phrase) {
				d.flags |= fHideFromUser
				return
			}
		}
	}
}

func containsAny(b []byte, words [][]byte) bool {
	for _, w := range words {
		if bytes.Contains(b, w) {
			return true
		}
	}
	return false
}

// tryDecode decodes a base64 run (up to maxBase64Decode bytes of it) and
// scans what it holds if that is mostly printable text.
func (d *detector) tryDecode(run string) {
	run = run[:min(len(run), maxBase64Decode*4/3)]
	run = run[:len(run)/4*4]
	d.src = append(d.src[:0], strings.TrimRight(run, "=")...)
	var out []byte
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		d.buf = slices.Grow(d.buf[:0], enc.DecodedLen(len(d.src)))[:enc.DecodedLen(len(d.src))]
		if n, err := enc.Decode(d.buf, d.src); err == nil {
			out = d.buf[:n]
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
	var inner detector
	inner.scan(string(out), false)
	d.inner = inner.names(d.inner, "base64:")
}
