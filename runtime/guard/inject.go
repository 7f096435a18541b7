package guard

import (
	"math/bits"
	"slices"

	"github.com/mcpledger/mcpledger/runtime/internal/swar"
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
		x, y := swar.Load64(s, base+k), swar.Load64(s, base+k+1)
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
		maybeB64 |= inB64Range(swar.Load64(s, base+k)) << (k >> 3)
	}
	for ; k < 64 && base+k+1 < len(s); k++ { // the last byte starts nothing
		m |= uint64(detectPairs[uint16(s[base+k])|uint16(s[base+k+1])<<8]) << k
	}
	return m, maybeB64
}

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
