package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// Reading JSON as people write config files: JSONC comments and trailing
// commas stripped (keeping every byte's offset), members in file order
// with their offsets, and offsets turned into file:line:col.

// stringArray decodes b as an array of strings. On failure it reports
// the index of the first non-string element (-1: not an array).
func stringArray(b []byte) ([]string, int, bool) {
	var raw []json.RawMessage
	if json.Unmarshal(b, &raw) != nil {
		return nil, -1, true
	}
	out := make([]string, len(raw))
	for i, r := range raw {
		if json.Unmarshal(r, &out[i]) != nil {
			return nil, i, true
		}
	}
	return out, 0, false
}

// objectMembers returns the members of the JSON object b (which starts at
// absolute offset base), in order, duplicates kept. ok is false when b is
// not an object. b must be valid JSON.
func objectMembers(b []byte, base int) ([]member, bool) {
	start := firstNonSpace(b, 0)
	if start >= len(b) || b[start] != '{' {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil { // '{'
		return nil, false
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, ok := tok.(string)
		if !ok {
			return nil, false
		}
		i := int(dec.InputOffset())
		for i < len(b) && (isSpace(b[i]) || b[i] == ':') {
			i++
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, false
		}
		out = append(out, member{key: key, val: raw, off: base + i})
	}
	return out, true
}

func isNull(b []byte) bool { return string(bytes.TrimSpace(b)) == "null" }

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isControl(r rune) bool { return r < ' ' || r == 0x7f }

func firstNonSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// position formats "path:line:col" for byte offset off of data: line and
// column count from 1, the column in bytes.
func position(path string, data []byte, off int) string {
	off = min(max(off, 0), len(data))
	line := 1 + bytes.Count(data[:off], []byte{'\n'})
	col := off - bytes.LastIndexByte(data[:off], '\n')
	return fmt.Sprintf("%s:%d:%d", path, line, col)
}

// stripJSONC blanks // and /* */ comments, trailing commas and a UTF-8
// BOM, as VS Code's mcp.json allows them. The result has the same length
// and line breaks as data, so offsets into it are offsets into the file.
// An unterminated block comment is left alone (and fails to parse).
func stripJSONC(data []byte) []byte {
	if !bytes.ContainsAny(data, "/,\xef") {
		return data
	}
	b := slices.Clone(data)
	if bytes.HasPrefix(b, []byte("\xef\xbb\xbf")) {
		copy(b, "   ")
	}
	blank := func(i, j int) {
		for ; i < j; i++ {
			if b[i] != '\n' {
				b[i] = ' '
			}
		}
	}
	comma, last := -1, byte(0) // pending comma; last significant byte
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			comma, last = -1, c
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case c == '/' && i+1 < len(b) && b[i+1] == '/':
			j := bytes.IndexByte(b[i:], '\n')
			if j < 0 {
				j = len(b) - i
			}
			blank(i, i+j)
			i += j - 1
		case c == '/' && i+1 < len(b) && b[i+1] == '*':
			j := bytes.Index(b[i+2:], []byte("*/"))
			if j < 0 {
				return b
			}
			blank(i, i+2+j+2)
			i += 2 + j + 1
		case isSpace(c):
		case c == ',':
			comma = -1
			if last != '{' && last != '[' && last != ',' {
				comma = i
			}
			last = c
		case c == '}' || c == ']':
			if comma >= 0 {
				b[comma] = ' '
			}
			comma, last = -1, c
		default:
			comma, last = -1, c
		}
	}
	return b
}
