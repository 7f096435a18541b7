package guard

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/mcpledger/mcpledger/runtime/internal/swar"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultMaxResultChars bounds the rendered text of a result (seed 001:
// "so a chatty MCP tool can't blow out the agent's context window").
const DefaultMaxResultChars = 50_000

// Rendered is a result rendered as text for an agent's context.
type Rendered struct {
	// Text is the rendered output, truncated (with a marker) if needed.
	Text string
	// Chars is the length of the whole rendering in characters, Cut how
	// many of them truncation removed.
	Chars, Cut int
	// Bytes, for a result cut in transit whose whole rendering's length
	// is not known (Transit.Chars < 0), is the size in bytes of the
	// server's message; Chars is then the length of what arrived.
	Bytes int64
}

// Transit describes a result that was cut on its way in, before it was
// decoded, because the server's message was too large to hold (the
// runtime's MaxMessageBytes): its texts kept a prefix, later blocks were
// dropped, and its other strings, arrays and objects were cut as
// BoundJSON cuts them, saying so.
type Transit struct {
	// Bytes is the size of the server's message in bytes.
	Bytes int64
	// Chars is the length in characters of the whole result's rendering
	// (as RenderResult counts it: texts only), or -1 when it is not known:
	// the result held a block other than text, or only structured content.
	Chars int64
}

// RenderResult renders res as text: text blocks verbatim, every other
// block (image, audio, resource) as its JSON, one block per line; the
// structured content as JSON when there are no blocks. Past maxChars
// characters (runes; <= 0: no bound) the text is cut at a character
// boundary and a line says how many characters were cut. Memory stays
// proportional to maxChars plus the largest non-text block.
func RenderResult(res *mcp.CallToolResult, maxChars int) Rendered {
	if res == nil {
		return Rendered{}
	}
	r := renderResult(res, maxChars)
	return r.done()
}

// RenderTransit is RenderResult for a result cut in transit as t says:
// the marker gives the whole result's size, not the size of what
// arrived: "[mcpledger: output truncated: CUT of CHARS characters cut]"
// with CHARS t.Chars, or, when that is not known,
// "[mcpledger: output truncated: the server's response was BYTES bytes;
// KEPT characters kept]". maxChars <= 0 bounds nothing further, but the
// marker is still written: the result was cut.
func RenderTransit(res *mcp.CallToolResult, maxChars int, t Transit) Rendered {
	if res == nil {
		return Rendered{}
	}
	r := renderResult(res, maxChars)
	if t.Chars < 0 {
		out := r.done()
		out.Bytes = t.Bytes
		out.Text = r.text() + "\n" + transitMarker(t.Bytes, r.kept)
		return out
	}
	r.chars = max(r.chars, int(t.Chars))
	return r.done()
}

// transitMarker is the marker of a result cut in transit whose whole
// rendering's length is not known.
func transitMarker(bytes int64, kept int) string {
	return fmt.Sprintf("[mcpledger: output truncated: the server's response was %d bytes; %d characters kept]", bytes, kept)
}

// renderResult renders res up to maxChars characters, counting the rest.
func renderResult(res *mcp.CallToolResult, maxChars int) renderer {
	if len(res.Content) == 1 {
		// One text block that fits, the common case: the text itself.
		if t, ok := res.Content[0].(*mcp.TextContent); ok && (maxChars <= 0 || len(t.Text) <= maxChars) {
			n := swar.RuneCount(t.Text)
			return renderer{max: maxChars, chars: n, kept: n, whole: t.Text}
		}
	}
	r := renderer{max: maxChars}
	for i, c := range res.Content {
		if i > 0 {
			r.add("\n")
		}
		if t, ok := c.(*mcp.TextContent); ok {
			r.add(t.Text)
			continue
		}
		b, err := json.Marshal(c)
		if err != nil {
			b = []byte(fmt.Sprintf(`{"error":%q}`, err.Error()))
		}
		r.add(string(b))
	}
	if len(res.Content) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			r.add(string(b))
		}
	}
	return r
}

// renderer accumulates pieces up to max characters and counts the rest.
type renderer struct {
	sb    strings.Builder
	max   int
	chars int    // characters seen
	kept  int    // characters written
	whole string // the text, when it is one text block kept whole (not copied)
}

// text is what the renderer kept.
func (r *renderer) text() string {
	if r.whole != "" {
		return r.whole
	}
	return r.sb.String()
}

func (r *renderer) add(s string) {
	if r.max <= 0 {
		r.sb.WriteString(s)
		r.chars += swar.RuneCount(s)
		r.kept = r.chars
		return
	}
	room := r.max - r.kept // >= 0: kept grows by at most room
	if len(s) <= room {    // at most room runes
		r.sb.WriteString(s)
		n := swar.RuneCount(s)
		r.chars += n
		r.kept += n
		return
	}
	// Write room runes (none once the text is full), count the rest.
	i, n := 0, 0
	for i < len(s) && n < room {
		_, w := utf8.DecodeRuneInString(s[i:])
		i += w
		n++
	}
	r.sb.WriteString(s[:i])
	r.kept += n
	r.chars += n + swar.RuneCount(s[i:])
}

func (r *renderer) done() Rendered {
	out := Rendered{Text: r.text(), Chars: r.chars, Cut: r.chars - r.kept}
	if out.Cut > 0 {
		out.Text += fmt.Sprintf("\n[mcpledger: output truncated: %d of %d characters cut]", out.Cut, out.Chars)
	}
	return out
}

// WrapOutput wraps text in boundary markers that attribute it to a server
// and tool and mark it untrusted (seed 001):
//
//	<mcp_tool_output server="S" tool="T" trust="untrusted">
//	text
//	</mcp_tool_output>
//
// Names are sanitized to [a-zA-Z0-9._-] (anything else becomes '_') so
// they cannot break out of the attribute, and a marker tag inside text is
// defused ("<" written as "&lt;") so the output cannot close the boundary
// early; nothing else in text changes.
func WrapOutput(server, tool, text string) string {
	head := `<mcp_tool_output server="` + attrName(server) + `" tool="` + attrName(tool) + `" trust="untrusted">` + "\n"
	const tail = "\n</mcp_tool_output>"
	var sb strings.Builder
	sb.Grow(len(head) + len(text) + len(tail))
	sb.WriteString(head)
	// One pass: '<' is rare in text, so IndexByte skips most of it.
	w := 0 // text[:w] is written
	for i := 0; ; i++ {
		j := strings.IndexByte(text[i:], '<')
		if j < 0 {
			break
		}
		i += j
		rest := text[i+1:]
		if strings.HasPrefix(rest, "mcp_tool_output") || strings.HasPrefix(rest, "/mcp_tool_output") {
			sb.WriteString(text[w:i])
			sb.WriteString("&lt;")
			w = i + 1
		}
	}
	sb.WriteString(text[w:])
	sb.WriteString(tail)
	return sb.String()
}

// attrName keeps [a-zA-Z0-9._-] and replaces every other byte with '_'.
func attrName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(isAlnum(c) || c == '.' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "_"
	}
	return string(b)
}
