package guard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/mcpledger/mcpledger/runtime/internal/swar"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BoundResult bounds res for a client that takes results as results (the
// gateway) the way RenderResult bounds its rendering for an agent's
// context, keeping the result's shape. r is RenderResult(res, maxChars):
// if it cut nothing and the structured content fits, res itself is
// returned. Otherwise a copy where:
//
//   - blocks are kept in order while they fit in maxChars characters (one
//     character between blocks, as rendered); the first that does not is
//     cut: a text block at a character boundary, a text block holding a
//     JSON object or array structurally (see BoundJSON), any other block
//     dropped; later blocks are dropped;
//   - structured content longer than maxChars characters as JSON is
//     bounded structurally (BoundJSON): it stays valid JSON;
//   - when the rendering was cut, a last text block says how many
//     characters were cut of how many (the whole rendering's size, as r
//     counts it): "[mcpledger: output truncated: CUT of CHARS characters
//     cut]" (structured content cut alone says so inside, see BoundJSON).
//
// For a result cut in transit (r from RenderTransit), r.Chars is the
// whole result's size, so the marker gives that; when it is not known
// (r.Bytes > 0) the marker is always added and says "[mcpledger: output
// truncated: the server's response was BYTES bytes; KEPT characters
// kept]".
//
// maxChars <= 0 bounds nothing, but a result cut in transit still gets
// its marker.
func BoundResult(res *mcp.CallToolResult, r Rendered, maxChars int) *mcp.CallToolResult {
	if res == nil {
		return nil
	}
	transit := r.Bytes > 0
	limit := maxChars
	if limit <= 0 {
		limit = math.MaxInt
	}
	var structured []byte
	if res.StructuredContent != nil && maxChars > 0 {
		if b := encodeJSON(res.StructuredContent); utf8.RuneCount(b) > maxChars {
			structured = b
		}
	}
	if r.Cut == 0 && !transit && structured == nil {
		return res
	}
	out := *res
	kept := 0 // characters kept of the rendering: blocks, the lines between them
	if structured != nil {
		b := boundJSON(structured, maxChars)
		out.StructuredContent = json.RawMessage(b)
		if len(res.Content) == 0 { // rendered as the structured content
			kept = utf8.RuneCount(b)
		}
	}
	if r.Cut == 0 && !transit {
		return &out
	}
	out.Content = make([]mcp.Content, 0, len(res.Content)+1)
	for i, c := range res.Content {
		line := min(i, 1)
		room := limit - kept - line
		if room <= 0 {
			break
		}
		if t, ok := c.(*mcp.TextContent); ok {
			if n := swar.RuneCount(t.Text); n <= room {
				out.Content = append(out.Content, c)
				kept += line + n
				continue
			}
			cp := *t
			cp.Text = cutText(t.Text, room)
			out.Content = append(out.Content, &cp)
			kept += line + utf8.RuneCountInString(cp.Text)
			break
		}
		b, err := json.Marshal(c)
		if err != nil || utf8.RuneCount(b) > room {
			break
		}
		out.Content = append(out.Content, c)
		kept += line + utf8.RuneCount(b)
	}
	marker := fmt.Sprintf("[mcpledger: output truncated: %d of %d characters cut]", max(r.Chars-kept, 0), r.Chars)
	if transit {
		marker = transitMarker(r.Bytes, kept)
	}
	out.Content = append(out.Content, &mcp.TextContent{Text: marker})
	return &out
}

// cutText keeps at most room characters of s: structurally when s is a
// JSON object or array (BoundJSON), else its first room characters.
func cutText(s string, room int) string {
	if t := strings.TrimSpace(s); t != "" && (t[0] == '{' || t[0] == '[') && json.Valid([]byte(t)) {
		return string(boundJSON([]byte(t), room))
	}
	return prefixRunes(s, room)
}

// BoundJSON returns the JSON document doc within about maxChars
// characters as valid JSON: object members (in key order) and array
// items are kept while they fit, the one that does not is bounded in
// turn, and the rest are dropped; a cut string ends with
// "…[mcpledger: N characters cut]", a cut array ends with the item
// "[mcpledger: N of M items cut]", and a cut object gets the member
// "mcpledger_truncated": "N of M members cut". A document with no room
// for any of it keeps only its kind: {"mcpledger_truncated": "all N
// characters cut"}, ["[mcpledger: all N characters cut]"] or that string.
// A document that fits, or that is not valid JSON, is returned as it is.
func BoundJSON(doc []byte, maxChars int) []byte {
	if !json.Valid(doc) {
		return doc
	}
	return boundJSON(doc, maxChars)
}

// boundJSON is BoundJSON of a valid document.
func boundJSON(doc []byte, maxChars int) []byte {
	if utf8.RuneCount(doc) <= maxChars {
		return doc
	}
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return doc
	}
	kept, _, f := fitJSON(v, maxChars)
	if f == fitNone { // keep the kind of the document: a result's structured content is an object
		note := fmt.Sprintf("all %d characters cut", utf8.RuneCount(doc))
		switch v.(type) {
		case map[string]any:
			kept = map[string]any{"mcpledger_truncated": note}
		case []any:
			kept = []any{"[mcpledger: " + note + "]"}
		default:
			kept = "[mcpledger: " + note + "]"
		}
	}
	return encodeJSON(kept)
}

// fit says how much of a JSON value fitJSON kept.
type fit int

const (
	fitWhole fit = iota // all of it
	fitCut              // a part, saying what was cut
	fitNone             // nothing: not even a part fits
)

// fitJSON returns v cut to encode in at most room characters (leaving
// out what follows a cut is the caller's part), and, when it is whole, how
// many it takes.
func fitJSON(v any, room int) (any, int, fit) {
	n := jsonLen(v)
	if n <= room {
		return v, n, fitWhole
	}
	out, f := any(nil), fitNone
	switch x := v.(type) {
	case string:
		out, f = fitString(x, room)
	case []any:
		out, f = fitArray(x, room)
	case map[string]any:
		out, f = fitObject(x, room)
	}
	return out, 0, f
}

// noteRoom is the most characters a note on a cut takes (with its comma).
const noteRoom = 56

func fitString(s string, room int) (any, fit) {
	all := swar.RuneCount(s)
	for keep := room - noteRoom; keep > 0; {
		out := fmt.Sprintf("%s…[mcpledger: %d characters cut]", prefixRunes(s, keep), all-keep)
		n := jsonLen(out)
		if n <= room {
			return out, fitCut
		}
		keep -= n - room // escaped characters take more than one
	}
	return nil, fitNone
}

// prefixRunes returns the first n characters of s.
func prefixRunes(s string, n int) string {
	k := 0
	for i := range s { // i: where each character starts
		if k == n {
			return s[:i]
		}
		k++
	}
	return s
}

func fitArray(a []any, room int) (any, fit) {
	out := make([]any, 0, len(a))
	used := 2 // []
	for i, e := range a {
		comma := min(i, 1)
		v, n, f := fitJSON(e, room-used-comma-noteRoom)
		if f == fitNone {
			break
		}
		out = append(out, v)
		if f == fitCut {
			break
		}
		used += comma + n
	}
	if len(out) == 0 && room < 2+noteRoom {
		return nil, fitNone
	}
	return append(out, fmt.Sprintf("[mcpledger: %d of %d items cut]", len(a)-len(out), len(a))), fitCut
}

func fitObject(o map[string]any, room int) (any, fit) {
	keys := slices.Sorted(maps.Keys(o))
	out := make(map[string]any, len(o))
	used := 2 // {}
	for i, k := range keys {
		head := min(i, 1) + jsonLen(k) + 1 // the comma, "k":
		v, n, f := fitJSON(o[k], room-used-head-noteRoom)
		if f == fitNone {
			break
		}
		out[k] = v
		if f == fitCut {
			break
		}
		used += head + n
	}
	if len(out) == 0 && room < 2+noteRoom {
		return nil, fitNone
	}
	out["mcpledger_truncated"] = fmt.Sprintf("%d of %d members cut", len(o)-len(out), len(o))
	return out, fitCut
}

// encodeJSON is v as JSON, with <, > and & as they are (json.Marshal
// would escape them: the kept part of a document stays as it was).
func encodeJSON(v any) []byte {
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	_ = e.Encode(v) // values decoded from JSON, and strings: they encode
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// jsonLen is how many characters v takes as JSON.
func jsonLen(v any) int { return utf8.RuneCount(encodeJSON(v)) }
