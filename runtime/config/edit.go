package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Editing a config file as a person would: one member of one object
// replaced, inserted or deleted, every other byte of the file (other
// keys, their order, comments, indentation, trailing commas) left as it
// was. A file is never decoded into a map and written back: a user's
// ~/.claude.json holds much besides servers.

// ErrNotEditable is wrapped by the errors of an edit refused because of
// what the file holds: not JSON, not an object, or a member on the way
// to the server list that is not an object. The file is left as it was.
var ErrNotEditable = errors.New("config: the file cannot be edited")

// span is one member of an object in (comment-stripped) JSON text:
// the key's opening quote, the value's first byte and the byte after it.
type span struct {
	key                        string
	keyStart, valStart, valEnd int
}

// editDoc is a file's text with its comment-stripped twin: offsets into
// one are offsets into the other, so positions are found in s and edits
// made to orig.
type editDoc struct {
	path string
	orig []byte
	s    []byte
	unit string // one level of indentation, as the file writes it
	nl   string // the file's line break: "\r\n" if it has any, else "\n"
}

func newEditDoc(path string, data []byte) (*editDoc, error) {
	if len(bytes.TrimSpace(stripJSONC(data))) == 0 { // empty, or comments only: kept above
		data = append(bytes.TrimRight(slices.Clip(data), " \t\r\n"), '\n')
		data = append(bytes.TrimLeft(data, "\n"), "{}\n"...)
	}
	d := &editDoc{path: path, orig: data, s: stripJSONC(data)}
	if err := json.Unmarshal(d.s, new(json.RawMessage)); err != nil {
		off := 0
		var se *json.SyntaxError
		if errors.As(err, &se) {
			off = int(se.Offset) - 1
		}
		return nil, fmt.Errorf("%w: %s: %s; fix the JSON syntax first (the file was not changed)",
			ErrNotEditable, position(path, d.s, off), strings.TrimPrefix(err.Error(), "json: "))
	}
	if i := skipWS(d.s, 0); d.s[i] != '{' {
		return nil, fmt.Errorf("%w: %s: the file holds JSON that is not an object; it must be one like {\"mcpServers\": {}} (the file was not changed)",
			ErrNotEditable, position(path, d.s, i))
	}
	d.unit = d.indentUnit()
	d.nl = "\n"
	if bytes.Contains(data, []byte("\r\n")) {
		d.nl = "\r\n"
	}
	return d, nil
}

// indentUnit guesses the file's indentation step from its top-level
// object's first member ("  " when it has none or is on one line).
func (d *editDoc) indentUnit() string {
	top := skipWS(d.s, 0)
	ms, _ := objectSpans(d.s, top)
	if len(ms) > 0 {
		if ind, multi := d.lineIndent(top+1, ms[0].keyStart); multi && ind != "" {
			return ind
		}
	}
	return "  "
}

// lineIndent returns the whitespace that starts the line holding offset
// at, and whether a line break lies between from and at.
func (d *editDoc) lineIndent(from, at int) (string, bool) {
	nl := bytes.LastIndexByte(d.s[:at], '\n')
	start := nl + 1
	end := start
	for end < at && (d.s[end] == ' ' || d.s[end] == '\t') {
		end++
	}
	return string(d.s[start:end]), nl >= from
}

// find walks keys from the top-level object. It returns the object the
// walk stopped in (its '{' offset), its members, how many keys were
// found, and the last found member.
func (d *editDoc) find(keys []string) (obj int, ms []span, found int, last span, err error) {
	obj = skipWS(d.s, 0)
	for found < len(keys) {
		ms, _ = objectSpans(d.s, obj)
		i := lastSpan(ms, keys[found])
		if i < 0 {
			return obj, ms, found, last, nil
		}
		last = ms[i]
		found++
		if found == len(keys) {
			return obj, ms, found, last, nil
		}
		if d.s[last.valStart] != '{' {
			return 0, nil, 0, span{}, fmt.Errorf("%w: %s: %s is %s, not an object; make it an object (or remove it) first (the file was not changed)",
				ErrNotEditable, position(d.path, d.s, last.valStart), keyPath(keys[:found]), jsonKind(d.s[last.valStart]))
		}
		obj = last.valStart
	}
	return obj, ms, found, last, nil
}

// get returns the raw value at keys (nil when a key is missing).
func (d *editDoc) get(keys []string) ([]byte, error) {
	_, _, found, last, err := d.find(keys)
	if err != nil || found < len(keys) {
		return nil, err
	}
	return d.orig[last.valStart:last.valEnd], nil
}

// set returns the text with the member at keys set to value (valid
// JSON): replaced in place if it exists (the last of duplicates, the one
// parsers use), else appended to its object, creating the missing
// objects on the way. value is indented to its place.
func (d *editDoc) set(keys []string, value []byte) ([]byte, error) {
	for _, k := range keys {
		if !utf8.ValidString(k) {
			return nil, fmt.Errorf("%w: the name %q is not valid UTF-8: rename that entry by hand", ErrNotEditable, k)
		}
	}
	obj, ms, found, last, err := d.find(keys)
	if err != nil {
		return nil, err
	}
	if found == len(keys) {
		ind, multi := d.lineIndent(obj+1, last.keyStart)
		return splice(d.orig, last.valStart, last.valEnd, d.format(value, ind, multi)), nil
	}
	// Wrap value in the objects that are missing: {"k2": {"k3": value}}.
	var b bytes.Buffer
	for _, k := range keys[found+1:] {
		kb, _ := json.Marshal(k)
		b.WriteString(`{` + string(kb) + `:`)
	}
	b.Write(value)
	b.WriteString(strings.Repeat("}", len(keys)-found-1))
	kb, _ := json.Marshal(keys[found])
	closeAt := closingBrace(d.s, obj)
	if len(ms) == 0 {
		outer, _ := d.lineIndent(0, obj)
		ind := outer + d.unit
		text := d.nl + ind + string(kb) + ": " + string(d.format(b.Bytes(), ind, true)) + d.nl + outer
		if len(bytes.TrimSpace(d.orig[obj+1:closeAt])) == 0 {
			return splice(d.orig, obj+1, closeAt, []byte(text)), nil
		}
		return splice(d.orig, obj+1, obj+1, []byte(strings.TrimSuffix(text, d.nl+outer)+",")), nil
	}
	end := ms[len(ms)-1]
	ind, multi := d.lineIndent(obj+1, ms[0].keyStart)
	sep := " "
	if multi {
		sep = d.nl + ind
	}
	text := "," + sep + string(kb) + ": " + string(d.format(b.Bytes(), ind, multi))
	return splice(d.orig, end.valEnd, end.valEnd, []byte(text)), nil
}

// remove returns the text without the member at keys (every duplicate
// of it) and whether there was one. What separates it from its
// neighbours goes with it.
func (d *editDoc) remove(keys []string) ([]byte, bool, error) {
	out, removed := d.orig, false
	for cur := d; ; {
		obj, ms, found, _, err := cur.find(keys)
		if err != nil {
			return nil, false, err
		}
		if found < len(keys) {
			return out, removed, nil
		}
		i := lastSpan(ms, keys[len(keys)-1])
		if from, to, comma, ok := cur.memberLines(obj, ms[i]); ok && len(ms) > 1 {
			out = splice(cur.orig, from, to, nil)
			if comma >= 0 {
				out = splice(out, comma, comma+1, nil)
			}
		} else {
			switch {
			case i > 0:
				out = splice(cur.orig, ms[i-1].valEnd, ms[i].valEnd, nil)
			case len(ms) > 1:
				out = splice(cur.orig, ms[0].keyStart, ms[1].keyStart, nil)
			default:
				out = splice(cur.orig, obj+1, closingBrace(cur.s, obj), nil)
			}
		}
		removed = true
		if cur, err = newEditDoc(d.path, out); err != nil {
			return nil, false, err // cannot happen: the edit keeps the JSON valid
		}
	}
}

// memberLines returns the lines member m of the object at obj occupies
// when it has lines of its own: from the end of the line before it (so
// that line keeps its trailing comment) through its trailing comma and
// the rest of its last line, comment lines just above it included. comma
// is the separator before it to delete when m is the last member without
// a trailing comma (-1 for none). ok is false for a member that shares a
// line with another.
func (d *editDoc) memberLines(obj int, m span) (from, to, comma int, ok bool) {
	prev := m.keyStart - 1 // the last significant byte before m: ',' or '{'
	for prev > obj && isSpace(d.s[prev]) {
		prev--
	}
	nl := bytes.IndexByte(d.s[prev+1:m.keyStart], '\n')
	if nl < 0 {
		return 0, 0, 0, false
	}
	from = prev + 1 + nl
	after := skipWS(d.s, m.valEnd)
	to, comma = m.valEnd, -1
	if d.s[after] == ',' {
		to = after + 1
	} else if d.s[prev] == ',' {
		comma = prev
	}
	for to < len(d.s) && (d.s[to] == ' ' || d.s[to] == '\t' || d.s[to] == '\r') {
		to++
	}
	if to < len(d.s) && d.s[to] != '\n' {
		return 0, 0, 0, false
	}
	return from, to, comma, true
}

// format indents value (valid JSON) for a member whose line starts with
// ind: multi-line in a multi-line object, compact in a one-line one.
func (d *editDoc) format(value []byte, ind string, multi bool) []byte {
	var b bytes.Buffer
	if !multi {
		_ = json.Compact(&b, value)
		return b.Bytes()
	}
	var c bytes.Buffer
	_ = json.Compact(&c, value)
	_ = json.Indent(&b, c.Bytes(), ind, d.unit)
	if d.nl != "\n" {
		return bytes.ReplaceAll(b.Bytes(), []byte("\n"), []byte(d.nl))
	}
	return b.Bytes()
}

func splice(b []byte, i, j int, text []byte) []byte {
	out := make([]byte, 0, len(b)-(j-i)+len(text))
	out = append(out, b[:i]...)
	out = append(out, text...)
	return append(out, b[j:]...)
}

func lastSpan(ms []span, key string) int {
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].key == key {
			return i
		}
	}
	return -1
}

func keyPath(keys []string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = fmt.Sprintf("%q", k)
	}
	return strings.Join(q, " → ")
}

func jsonKind(c byte) string {
	switch c {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}

func skipWS(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// objectSpans returns the members of the object whose '{' is at b[open]
// and the offset of its '}'. b must be valid JSON (comments stripped).
func objectSpans(b []byte, open int) ([]span, int) {
	var out []span
	i := skipWS(b, open+1)
	for i < len(b) && b[i] != '}' {
		ks := i
		ke := skipValue(b, i)
		key := string(b[ks+1 : ke-1])
		if bytes.IndexByte(b[ks:ke], '\\') >= 0 || !utf8.Valid(b[ks:ke]) {
			_ = json.Unmarshal(b[ks:ke], &key)
		}
		i = skipWS(b, ke)
		i = skipWS(b, i+1) // ':'
		vs := i
		ve := skipValue(b, vs)
		out = append(out, span{key: key, keyStart: ks, valStart: vs, valEnd: ve})
		i = skipWS(b, ve)
		if i < len(b) && b[i] == ',' {
			i = skipWS(b, i+1)
		}
	}
	return out, i
}

func closingBrace(b []byte, open int) int {
	_, end := objectSpans(b, open)
	return end
}

// skipValue returns the offset just after the JSON value starting at
// b[i] (valid JSON).
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		for i++; i < len(b); i++ {
			switch b[i] {
			case '\\':
				i++
			case '"':
				return i + 1
			}
		}
		return i
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipValue(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	for i < len(b) && !isSpace(b[i]) && b[i] != ',' && b[i] != '}' && b[i] != ']' {
		i++
	}
	return i
}
