package guard

import (
	"bytes"
	"strings"
)

// The phrase detectors of DetectInjection: chat-template tokens, role
// lines, "ignore previous instructions" and its variants, requests to
// reveal the prompt or hide things from the user, spaced-out letters.

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
// <mcp_tool_output and </mcp_tool_output. s[i+1] exists: detectMask
// marks no last byte.
func (d *detector) angle(s string, i int) {
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
	for i := 0; words < 7; { // at the end of after, no word is found
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
