package guard

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func bound(res *mcp.CallToolResult, maxChars int) *mcp.CallToolResult {
	return BoundResult(res, RenderResult(res, maxChars), maxChars)
}

func texts(res *mcp.CallToolResult) []string {
	var out []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			out = append(out, t.Text)
		} else {
			out = append(out, fmt.Sprintf("<%T>", c))
		}
	}
	return out
}

// TestBoundResultFits: a result that fits (or no bound) is returned as it
// is, not copied.
func TestBoundResultFits(t *testing.T) {
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "abc"}, &mcp.TextContent{Text: "de"}},
		StructuredContent: map[string]any{"a": 1}}
	if got := bound(res, 7); got != res { // 3 + 1 + 2 characters, and {"a":1} is 7: exactly the bound
		t.Errorf("a result that fits was changed: %v", texts(got))
	}
	if got := bound(res, 0); got != res {
		t.Error("no bound changed the result")
	}
	if got := BoundResult(nil, Rendered{}, 10); got != nil {
		t.Errorf("nil result: %v", got)
	}
}

// TestBoundResultText: blocks are kept in order while they fit (the line
// between them counted), the first that does not is cut at a character
// boundary, later ones dropped, and the marker says how many characters
// were cut of the whole rendering, as RenderResult counts them. The
// server's result is not changed.
func TestBoundResultText(t *testing.T) {
	first := &mcp.TextContent{Text: "abcd"}
	res := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{first,
		&mcp.TextContent{Text: strings.Repeat("é", 20)}, &mcp.TextContent{Text: "tail"}}}
	got := bound(res, 10) // 4 + 1 + 5 of 20 é; cut 15 é, the line and "tail": 20 of 30
	want := []string{"abcd", "ééééé", "[mcpledger: output truncated: 20 of 30 characters cut]"}
	if fmt.Sprint(texts(got)) != fmt.Sprint(want) || !got.IsError {
		t.Errorf("got %q (isError %v), want %q", texts(got), got.IsError, want)
	}
	if got.Content[0] != first || len(res.Content) != 3 || res.Content[1].(*mcp.TextContent).Text != strings.Repeat("é", 20) {
		t.Error("the kept block was copied, or the server's result changed")
	}
	// A block that fits exactly is kept as it is.
	second := &mcp.TextContent{Text: "ef"}
	got = bound(&mcp.CallToolResult{Content: []mcp.Content{first, second, &mcp.TextContent{Text: "gh"}}}, 7)
	if len(got.Content) != 3 || got.Content[1] != second {
		t.Errorf("an exact fit was not kept as it is: %q", texts(got))
	}
	// A JSON array in a text block is cut as JSON.
	arr := "[" + strings.Repeat(`"item",`, 30) + `"last"]`
	got = bound(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: arr}}}, 100)
	if txt := texts(got); len(txt) != 2 || !json.Valid([]byte(txt[0])) || !strings.HasPrefix(txt[0], `["item","item",`) {
		t.Errorf("a JSON array text: %q", txt)
	}
	// A text that starts like JSON but is not is cut as text.
	notJSON := `{"a":1} ` + strings.Repeat("x", 20)
	got = bound(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: notJSON}}}, 10)
	if want := []string{`{"a":1} xx`, "[mcpledger: output truncated: 18 of 28 characters cut]"}; fmt.Sprint(texts(got)) != fmt.Sprint(want) {
		t.Errorf("got %q, want %q", texts(got), want)
	}
	// A bound that ends between two blocks drops the next one whole.
	got = bound(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "abcd"}, &mcp.TextContent{Text: "ef"}}}, 4)
	if want := []string{"abcd", "[mcpledger: output truncated: 3 of 7 characters cut]"}; fmt.Sprint(texts(got)) != fmt.Sprint(want) {
		t.Errorf("got %q, want %q", texts(got), want)
	}
	// ... and so does one that ends on the line between them (the line
	// is not kept either).
	got = bound(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "abcd"}, &mcp.TextContent{Text: "ef"}}}, 5)
	if want := []string{"abcd", "[mcpledger: output truncated: 3 of 7 characters cut]"}; fmt.Sprint(texts(got)) != fmt.Sprint(want) {
		t.Errorf("got %q, want %q", texts(got), want)
	}
}

// TestBoundResultBlocks: a non-text block is kept whole while its JSON
// fits, and dropped (with what follows) when it does not.
func TestBoundResultBlocks(t *testing.T) {
	img := &mcp.ImageContent{Data: []byte{1, 2, 3}, MIMEType: "image/png"} // 53 characters as JSON
	res := &mcp.CallToolResult{Content: []mcp.Content{img, &mcp.TextContent{Text: strings.Repeat("x", 100)}}}
	got := bound(res, 60) // 53 + 1 + 6 x
	if want := []string{"<*mcp.ImageContent>", "xxxxxx", "[mcpledger: output truncated: 94 of 154 characters cut]"}; fmt.Sprint(texts(got)) != fmt.Sprint(want) {
		t.Errorf("got %q, want %q", texts(got), want)
	}
	got = bound(res, 53) // the image fits exactly
	if want := []string{"<*mcp.ImageContent>", "[mcpledger: output truncated: 101 of 154 characters cut]"}; fmt.Sprint(texts(got)) != fmt.Sprint(want) {
		t.Errorf("got %q, want %q", texts(got), want)
	}
	got = bound(res, 52)
	if want := []string{"[mcpledger: output truncated: 154 of 154 characters cut]"}; fmt.Sprint(texts(got)) != fmt.Sprint(want) {
		t.Errorf("got %q, want %q", texts(got), want)
	}
	got = bound(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ab"}, img}}, 50)
	if want := []string{"ab", "[mcpledger: output truncated: 54 of 56 characters cut]"}; fmt.Sprint(texts(got)) != fmt.Sprint(want) {
		t.Errorf("got %q, want %q", texts(got), want)
	}
}

// bigDoc is a JSON document of about n characters: an object with a long
// string, a long array and nested objects.
func bigDoc(n int) map[string]any {
	items := make([]any, 0, n/20)
	for i := range n / 20 {
		items = append(items, map[string]any{"id": i, "name": fmt.Sprintf("item-%05d", i)})
	}
	return map[string]any{"count": len(items), "items": items, "note": strings.Repeat("n", n/2), "ok": true}
}

// TestBoundResultJSON: a JSON text block and structured content that do
// not fit stay valid JSON, about the bound long, with what was cut said
// inside; a structured content that fits is left alone.
func TestBoundResultJSON(t *testing.T) {
	doc := bigDoc(20_000)
	b, _ := json.Marshal(doc)
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: doc}
	got := bound(res, 2_000)
	txt := got.Content[0].(*mcp.TextContent).Text
	var v map[string]any
	if err := json.Unmarshal([]byte(txt), &v); err != nil {
		t.Fatalf("the cut JSON text is not JSON: %v\n%.300s", err, txt)
	}
	if n := utf8.RuneCountInString(txt); n > 2_000 || n < 1_000 {
		t.Errorf("the cut JSON text is %d characters, want about 2000", n)
	}
	// Members in key order: count whole, items cut, note and ok left out.
	items, _ := v["items"].([]any)
	if v["count"] != float64(len(doc["items"].([]any))) || len(items) < 10 || v["note"] != nil || v["mcpledger_truncated"] != "2 of 4 members cut" {
		t.Errorf("kept members: count %v, %d items, note %.20v, %v", v["count"], len(items), v["note"], v["mcpledger_truncated"])
	}
	if last := items[len(items)-1]; !strings.HasSuffix(fmt.Sprint(last), " items cut]") {
		t.Errorf("the cut array ends with %v", last)
	}
	sc, ok := got.StructuredContent.(json.RawMessage)
	if !ok || !json.Valid(sc) || utf8.RuneCount(sc) > 2_000 {
		t.Errorf("structured content %T valid %v, %d characters", got.StructuredContent, json.Valid(sc), len(sc))
	}
	last := got.Content[len(got.Content)-1].(*mcp.TextContent).Text
	if !strings.HasPrefix(last, "[mcpledger: output truncated: ") || !strings.HasSuffix(last, fmt.Sprintf(" of %d characters cut]", len(b))) {
		t.Errorf("marker %q", last)
	}
	// Structured content alone over the bound: bounded, the blocks kept.
	small := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}, StructuredContent: doc}
	got = bound(small, 2_000)
	if sc, ok := got.StructuredContent.(json.RawMessage); !ok || !json.Valid(sc) || fmt.Sprint(texts(got)) != "[ok]" {
		t.Errorf("structured alone: %T %v", got.StructuredContent, texts(got))
	}
	if small.StructuredContent == nil || got == small {
		t.Error("the server's result was changed, or not copied")
	}
	// Structured content without blocks is rendered: bounded, and marked.
	only := &mcp.CallToolResult{StructuredContent: doc}
	got = bound(only, 2_000)
	sc, ok = got.StructuredContent.(json.RawMessage)
	if !ok || !json.Valid(sc) || len(got.Content) != 1 {
		t.Fatalf("structured only: %T %v", got.StructuredContent, texts(got))
	}
	// What was kept is the structured content: the marker counts it.
	if want := fmt.Sprintf("[mcpledger: output truncated: %d of %d characters cut]", len(b)-len(sc), len(b)); texts(got)[0] != want {
		t.Errorf("structured only: marker %q, want %q", texts(got)[0], want)
	}
}

// TestBoundJSON holds each structural cut to valid JSON that says what
// was cut, and leaves what fits or is not JSON alone.
func TestBoundJSON(t *testing.T) {
	tests := []struct {
		name, doc string
		max       int
		want      string
	}{
		{"fits", `{"a":1}`, 7, `{"a":1}`},
		{"fits exactly, as written", `{"b":1, "a":2}`, 14, `{"b":1, "a":2}`},
		{"not JSON", strings.Repeat("x", 100), 10, strings.Repeat("x", 100)},
		{"not JSON, but starts as JSON", `{"a":1} and more` + strings.Repeat("x", 100), 10, `{"a":1} and more` + strings.Repeat("x", 100)},
		{"kept as written", `["<a&b>","` + strings.Repeat("x", 100) + `"]`, 70, `["<a&b>","[mcpledger: 1 of 2 items cut]"]`},
		{"string", `"` + strings.Repeat("a", 200) + `"`, 100, `"` + strings.Repeat("a", 44) + `…[mcpledger: 156 characters cut]"`},
		{"array", "[" + strings.Repeat(`"aaaaaaaaaa",`, 19) + `"aaaaaaaaaa"]`, 100,
			`["aaaaaaaaaa","aaaaaaaaaa","aaaaaaaaaa","[mcpledger: 17 of 20 items cut]"]`},
		{"object", `{"a":"` + strings.Repeat("x", 10) + `","b":"` + strings.Repeat("y", 300) + `","c":3}`, 200,
			`{"a":"xxxxxxxxxx","b":"` + strings.Repeat("y", 65) + `…[mcpledger: 235 characters cut]","mcpledger_truncated":"1 of 3 members cut"}`},
		{"object, no room for a part", `{"a":"` + strings.Repeat("x", 10) + `","b":"` + strings.Repeat("y", 300) + `","c":3}`, 130,
			`{"a":"xxxxxxxxxx","mcpledger_truncated":"2 of 3 members cut"}`},
		{"fits once compact", `[1, 2]`, 5, `[1,2]`},
		{"a string cut to exactly its room", `"` + strings.Repeat(`\"`, 200) + `"`, 78, `"` + strings.Repeat(`\"`, 22) + `…[mcpledger: 178 characters cut]"`},
		{"a string of escapes, cut twice", `"` + strings.Repeat(`\"`, 200) + `"`, 100, `"` + strings.Repeat(`\"`, 22) + `…[mcpledger: 178 characters cut]"`},
		{"a string with room for its note only", `"` + strings.Repeat("x", 100) + `"`, 56, `"[mcpledger: all 102 characters cut]"`},
		{"an array with room for its note only", `["` + strings.Repeat("x", 100) + `"]`, 58, `["[mcpledger: 1 of 1 items cut]"]`},
		{"an array with less", `["` + strings.Repeat("x", 100) + `"]`, 57, `["[mcpledger: all 104 characters cut]"]`},
		{"an object with room for its note only", `{"a":"` + strings.Repeat("x", 100) + `"}`, 58, `{"mcpledger_truncated":"1 of 1 members cut"}`},
		{"an object with less", `{"a":"` + strings.Repeat("x", 100) + `"}`, 57, `{"mcpledger_truncated":"all 108 characters cut"}`},
		{"an item one character too long", `[1,22,` + strings.Repeat("4444,", 20) + `5]`, 61, `[1,"[mcpledger: 22 of 23 items cut]"]`},
		{"an item that fits exactly", `[1,22,` + strings.Repeat("4444,", 20) + `5]`, 62, `[1,22,"[mcpledger: 21 of 23 items cut]"]`},
		{"a member one character too long", `{"a":1,"b":22,"c":` + strings.Repeat("4", 100) + `}`, 69, `{"a":1,"mcpledger_truncated":"2 of 3 members cut"}`},
		{"a member that fits exactly", `{"a":1,"b":22,"c":` + strings.Repeat("4", 100) + `}`, 70, `{"a":1,"b":22,"mcpledger_truncated":"1 of 3 members cut"}`},
		{"no room for an array", `[` + strings.Repeat(`1,`, 100) + `1]`, 20, `["[mcpledger: all 203 characters cut]"]`},
		{"no room for an object", `{"a":"` + strings.Repeat("x", 100) + `"}`, 20, `{"mcpledger_truncated":"all 108 characters cut"}`},
		{"no room for a string", `"` + strings.Repeat("x", 100) + `"`, 20, `"[mcpledger: all 102 characters cut]"`},
		{"no room for a number", `12345678901234567890`, 5, `"[mcpledger: all 20 characters cut]"`},
		{"numbers", `[1234567890,1234567890,1234567890,1234567890,1234567890,1234567890,1234567890,1234567890,1234567890]`, 80,
			`[1234567890,1234567890,"[mcpledger: 7 of 9 items cut]"]`},
	}
	for _, tt := range tests {
		got := string(BoundJSON([]byte(tt.doc), tt.max))
		if got != tt.want {
			t.Errorf("%s:\n got  %s\n want %s", tt.name, got, tt.want)
		}
		if !strings.HasPrefix(tt.name, "not JSON") && !json.Valid([]byte(got)) {
			t.Errorf("%s: not valid JSON: %s", tt.name, got)
		}
	}
}
