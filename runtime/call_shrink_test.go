package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/runtime/guard"
)

// tiny are limits small enough for hand-written cases.
var tiny = shrinkLimits{keep: 8, total: 300, structured: 200, meta: 100}

// shrinkAll runs a shrinker over msg fed in pieces of at most step bytes.
func shrinkAll(msg string, lim shrinkLimits, step int) ([]byte, jsonrpc.ID, guard.Transit, error) {
	s := newShrinker(lim)
	for i := 0; i < len(msg); i += step {
		if err := s.write([]byte(msg[i:min(i+step, len(msg))])); err != nil {
			return nil, jsonrpc.ID{}, guard.Transit{}, err
		}
	}
	return s.finish()
}

// decodeResult decodes a response's result as go-sdk's client does.
func decodeResult(t *testing.T, msg []byte) *mcp.CallToolResult {
	t.Helper()
	m, err := jsonrpc.DecodeMessage(msg)
	if err != nil {
		t.Fatalf("go-sdk does not decode %.300s: %v", msg, err)
	}
	r, ok := m.(*jsonrpc.Response)
	if !ok {
		t.Fatalf("%s is a %T", msg, m)
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(r.Result, &res); err != nil {
		t.Fatalf("the result of %s is not a CallToolResult: %v", msg, err)
	}
	return &res
}

func resp(result string) string { return `{"jsonrpc":"2.0","id":7,"result":` + result + `}` }

// TestShrink: what a cut response keeps, for each kind of value, and what
// it says about the whole.
func TestShrink(t *testing.T) {
	long := strings.Repeat("abcdefghij", 10) // 100 characters
	for _, tc := range []struct {
		name  string
		msg   string
		want  string // the rewritten message
		chars int64  // Transit.Chars
	}{
		{"short text whole", resp(`{"content":[{"type":"text","text":"hi"}]}`),
			resp(`{"content":[{"type":"text","text":"hi"}]}`), 2},
		{"long text: a prefix, no note", resp(`{"content":[{"type":"text","text":"` + long + `"}]}`),
			resp(`{"content":[{"type":"text","text":"abcdefgh"}]}`), 100},
		{"TypeScript key order", `{"result":{"content":[{"text":"` + long + `","type":"text"}]},"jsonrpc":"2.0","id":"s-3"}`,
			`{"result":{"content":[{"text":"abcdefgh","type":"text"}]},"jsonrpc":"2.0","id":"s-3"}`, 100},
		{"escapes are one character each", resp(`{"content":[{"type":"text","text":"a\n\"\\\/\u00e9\ud83d\ude00bcdefgh"}]}`),
			resp(`{"content":[{"type":"text","text":"a\n\"\\\/\u00e9\ud83d\ude00b"}]}`), 14},
		{"multibyte runes are not split", resp(`{"content":[{"type":"text","text":"éééééééééé中"}]}`),
			resp(`{"content":[{"type":"text","text":"éééééééé"}]}`), 11},
		{"a lone surrogate is one character", resp(`{"content":[{"type":"text","text":"\ud800\ud800\udc00\udc00abcdefgh"}]}`),
			resp(`{"content":[{"type":"text","text":"\ud800\ud800\udc00\udc00abcde"}]}`), 11},
		{"invalid UTF-8: a character a byte", resp("{\"content\":[{\"type\":\"text\",\"text\":\"\xe2\x82abcdefghij\"}]}"),
			resp("{\"content\":[{\"type\":\"text\",\"text\":\"\xe2\x82abcdef\"}]}"), 12},
		{"blocks past the budget dropped, counted", resp(`{"content":[` + strings.Repeat(`{"type":"text","text":"`+long+`"},`, 20) + `{"type":"text","text":"z"}]}`),
			resp(`{"content":[` + strings.TrimSuffix(strings.Repeat(`{"type":"text","text":"abcdefgh"},`, 8), ",") + `]}`), 20*100 + 1 + 20},
		{"image data at a base64 quantum", resp(`{"content":[{"type":"image","mimeType":"img","data":"QUJDREVGR0hJSktM"}]}`),
			resp(`{"content":[{"type":"image","mimeType":"img","data":"QUJDREVG"}]}`), -1},
		{"image data with an escaped slash", resp(`{"content":[{"type":"image","mimeType":"img","data":"QU\/DREVGR0hJ"}]}`),
			resp(`{"content":[{"type":"image","mimeType":"img","data":"QU\/DREVG"}]}`), -1},
		{"structured content: strings noted, items cut", resp(`{"content":[{"type":"text","text":"{}"}],"structuredContent":{"a":"` + long + `","b":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40],"c":{"d":1}}}`),
			resp(`{"content":[{"type":"text","text":"{}"}],"structuredContent":{"a":"abcdefgh…[mcpledger: 92 characters cut]","mcpledger_truncated":"2 of 3 members cut"}}`), 2},
		{"members past the structured budget", resp(`{"structuredContent":{"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12}}`),
			resp(`{"structuredContent":{"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"mcpledger_truncated":"6 of 12 members cut"}}`), -1},
		{"_meta and isError kept, an unknown member budgeted", resp(`{"content":[{"type":"text","text":"` + long + `"}],"isError":true,"_meta":{"x":"` + long + `"},"other":[` + strings.Repeat(`"`+long+`",`, 5) + `1]}`),
			resp(`{"content":[{"type":"text","text":"abcdefgh"}],"isError":true,"_meta":{"x":"abcdefgh…[mcpledger: 92 characters cut]"},"other":["[mcpledger: 6 of 6 items cut]"]}`), 100},
		{"nothing but empty content", resp(`{"content":[]}`), resp(`{"content":[]}`), 0},
		{"whitespace between tokens", " { \"jsonrpc\" : \"2.0\" , \"id\" : 7 , \"result\" : { \"content\" : [ { \"type\" : \"text\" , \"text\" : \"" + long + "\" } ] , \"isError\" : false } } ",
			resp(`{"content":[{"type":"text","text":"abcdefgh"}],"isError":false}`), 100},
		{"an embedded resource", resp(`{"content":[{"type":"resource","resource":{"uri":"f:///a","mimeType":"txt","text":"` + long + `"}}]}`),
			resp(`{"content":[{"type":"resource","resource":{"uri":"f:///a","mimeType":"txt","text":"abcdefg…[mcpledger: 93 characters cut]"}}]}`), -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, id, tr, err := shrinkAll(tc.msg, tiny, len(tc.msg))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
			if !json.Valid(got) {
				t.Errorf("not valid JSON: %s", got)
			}
			_ = decodeResult(t, got)
			if want := (jsonrpc.ID{}); id == want {
				t.Error("no id")
			}
			if tr.Bytes != int64(len(tc.msg)) || tr.Chars != tc.chars {
				t.Errorf("transit %+v, want %d bytes, %d characters", tr, len(tc.msg), tc.chars)
			}
			if tc.chars >= 0 { // the count is RenderResult's of the whole
				if n := guard.RenderResult(decodeResult(t, []byte(tc.msg)), 0).Chars; int64(n) != tc.chars {
					t.Errorf("RenderResult counts %d characters of the whole, the shrinker %d", n, tc.chars)
				}
			}
		})
	}
}

// TestShrinkRefuses: what is not a valid response with a result is
// refused (the caller falls back to discarding it).
func TestShrinkRefuses(t *testing.T) {
	for _, msg := range []string{
		``, `[]`, `"x"`, `{`, `{"id":1,"result":{}`, `{"id":1,"result":{}}}`, `{"id":1,"result":{}} x`,
		`{"id":1,"result":{"a" 1}}`, `{"id":1,"result":{"a":1,}}`, `{"id":1,"result":[1 2]}`, `{"id":1,"result":{"a":tru}}`,
		`{"id":1,"result":{"a":01}}`, `{"id":1,"result":{"a":1.}}`, `{"id":1,"result":{"a":-}}`, `{"id":1,"result":{"a":1e}}`,
		`{"id":1,"result":{"a":"\x"}}`, `{"id":1,"result":{"a":"\u12g4"}}`, "{\"id\":1,\"result\":{\"a\":\"\x01\"}}",
		`{"id":1,"result":{1:2}}`, `{"id":1,"result":{"a":1]}`, `{"id":1,"result":[1}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"no"}}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":{}}`,
		`{"jsonrpc":"2.0","result":{}}`, // no id
		`{"jsonrpc":"2.0","id":1}`,      // no result
		`{"id":[1],"result":{}}`,        // not an id
		`{"id":1,"result":{"a":` + strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth) + `}}`,
		`{"id":1,"result":{"` + strings.Repeat("k", maxKey+1) + `":1}}`,
		`{"id":1,"result":{"a":1` + strings.Repeat("0", maxScalar) + `}}`,
	} {
		if out, _, _, err := shrinkAll(msg, tiny, 3); !errors.Is(err, errShrink) {
			t.Errorf("%.80s: %v %s, want errShrink", msg, err, out)
		}
	}
}

// TestShrinkSplitAnywhere: a message fed in two pieces split at every
// byte, and a byte at a time, is rewritten as when fed whole.
func TestShrinkSplitAnywhere(t *testing.T) {
	msg := resp(`{"content":[{"type":"text","text":"a\u00e9\ud83d\ude00中é\\\"xyzxyzxyz中é` + "\xe2\x82中\xf0\x9f\x98" + `é"},{"type":"image","data":"QU\/DREVGR0hJ","mimeType":"i"}],` +
		`"structuredContent":{"k":[1.5e3,-0,true,false,null,"` + strings.Repeat("é", 20) + `"]},"_meta":{"p":{"q":[]}}}`)
	whole, _, wt, err := shrinkAll(msg, tiny, len(msg))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(msg); i++ {
		s := newShrinker(tiny)
		if s.write([]byte(msg[:i])) != nil || s.write([]byte(msg[i:])) != nil {
			t.Fatalf("split at %d: %v", i, s.err)
		}
		got, _, tr, err := s.finish()
		if err != nil || string(got) != string(whole) || tr != wt {
			t.Fatalf("split at %d: %v %+v\n%s\nwant\n%s", i, err, tr, got, whole)
		}
	}
	got, _, _, err := shrinkAll(msg, tiny, 1)
	if err != nil || string(got) != string(whole) {
		t.Fatalf("a byte at a time: %v\n%s\nwant\n%s", err, got, whole)
	}
	// The text's characters are counted as the decoder makes them (the
	// invalid sequences' bytes one each); the image makes the whole
	// rendering's size unknown.
	if wt.Chars != -1 {
		t.Errorf("transit %+v: a block other than text, the size should be unknown", wt)
	}
	var m struct {
		Result struct {
			Content []struct{ Text string }
		}
	}
	if err := json.Unmarshal([]byte(msg), &m); err != nil {
		t.Fatal(err)
	}
	s := newShrinker(tiny)
	_ = s.write([]byte(msg))
	if _, _, _, err := s.finish(); err != nil || s.textChars != int64(utf8.RuneCountInString(m.Result.Content[0].Text)) {
		t.Errorf("the text counted %d characters, the decoder %d (%v)", s.textChars, utf8.RuneCountInString(m.Result.Content[0].Text), err)
	}
}

// TestShrinkBounded: whatever the server sends, the output stays within
// the limits' budget: many blocks, many items, deep structure, long
// strings and long escapes.
func TestShrinkBounded(t *testing.T) {
	lim := shrinkLimitsFor(guard.DefaultMaxResultChars)
	bound := lim.total + lim.structured + 16*lim.keep // one block's strings past the total, escapes at 12 bytes a character
	for name, msg := range map[string]string{
		"one long text":    resp(`{"content":[{"type":"text","text":"` + strings.Repeat("x", 4<<20) + `"}]}`),
		"escaped pairs":    resp(`{"content":[{"type":"text","text":"` + strings.Repeat(`\ud83d\ude00`, 1<<18) + `"}]}`),
		"many blocks":      resp(`{"content":[` + strings.Repeat(`{"type":"text","text":"abc"},`, 1<<16) + `{"type":"text","text":""}]}`),
		"many items":       resp(`{"content":[],"structuredContent":{"a":[` + strings.Repeat(`"abc",`, 1<<18) + `1]}}`),
		"many members":     resp(`{"content":[],"structuredContent":{` + strings.Repeat(`"k":"abc",`, 1<<18) + `"z":1}}`),
		"unknown members":  resp(`{"content":[{"type":"text","text":"a"` + strings.Repeat(`,"u":"abcdefgh"`, 1<<17) + `}]}`),
		"duplicate keys":   resp(`{"content":[{"type":"text"` + strings.Repeat(`,"text":"abcdefgh"`, 1<<17) + `}]}`),
		"deep in a result": resp(`{"content":[],"structuredContent":` + strings.Repeat(`[`, 200) + strings.Repeat(`"`+strings.Repeat("y", 9000)+`",`, 100) + `1` + strings.Repeat(`]`, 200) + `}`),
	} {
		got, _, _, err := shrinkAll(msg, lim, 64<<10)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(got) > bound || !json.Valid(got) {
			t.Errorf("%s: %d bytes (bound %d), valid %v: %.300s", name, len(got), bound, json.Valid(got), got)
		}
		_ = decodeResult(t, got)
	}
}

// TestShrinkLimitsFor: the limits follow the result bound, between the
// guard's default and maxKeep.
func TestShrinkLimitsFor(t *testing.T) {
	d := guard.DefaultMaxResultChars
	for _, tc := range []struct {
		bound int
		want  shrinkLimits
	}{
		{0, shrinkLimits{keep: d, total: 4 * d, structured: d, meta: 4 << 10}},
		{40, shrinkLimits{keep: d, total: 4 * d, structured: 40, meta: 4 << 10}},
		{d, shrinkLimits{keep: d, total: 4 * d, structured: d, meta: 4 << 10}},
		{200_000, shrinkLimits{keep: 200_000, total: 800_000, structured: 200_000, meta: 4 << 10}},
		{1 << 30, shrinkLimits{keep: maxKeep, total: 4 * maxKeep, structured: maxKeep, meta: 4 << 10}},
	} {
		if got := shrinkLimitsFor(tc.bound); got != tc.want {
			t.Errorf("bound %d: %+v, want %+v", tc.bound, got, tc.want)
		}
	}
}

// TestFrameCapCuts: an oversized response to a call that waits on a sink
// is cut in transit and says so on the sink; the same response to a
// request nobody waits on is answered with the error; a message split
// across reads at every byte is handled the same.
func TestFrameCapCuts(t *testing.T) {
	long := strings.Repeat("x", 300)
	msg := `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"é` + long + `"}]}}`
	small := `{"jsonrpc":"2.0","id":3,"result":{}}`
	in := msg + "\n" + small + "\n" + strings.Replace(msg, `"id":2`, `"id":9`, 1) + "\n"
	lim := shrinkLimits{keep: 10, total: 100, structured: 50, meta: 50}
	for step := 1; step <= len(in); step++ {
		calls := newWireCalls()
		sink := &wireSink{}
		id, _ := jsonrpc.MakeID(float64(2))
		calls.pending[id] = sink
		var cut []int64
		f := newFrameCap(io.NopCloser(&chunkReader{s: in, n: step}), 100, nil)
		f.calls, f.limits = calls, func() shrinkLimits { return lim }
		f.cut = func(size int64, kept int) { cut = append(cut, size, int64(kept)) }
		out, err := io.ReadAll(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		want0 := `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"é` + long[:9] + `"}]}}`
		if len(lines) != 3 || lines[0] != want0 || lines[1] != small || !strings.Contains(lines[2], `"code":-32050`) {
			t.Fatalf("reads of %d bytes:\n%s", step, out)
		}
		if sink.transit == nil || *sink.transit != (guard.Transit{Bytes: int64(len(msg)), Chars: 301}) {
			t.Fatalf("reads of %d bytes: transit %+v", step, sink.transit)
		}
		if len(cut) != 2 || cut[0] != int64(len(msg))+1 || cut[1] != int64(len(want0)) {
			t.Fatalf("reads of %d bytes: reported %v", step, cut)
		}
	}
}

// chunkReader reads s n bytes at a time.
type chunkReader struct {
	s string
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if c.s == "" {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), c.n)], c.s)
	c.s = c.s[k:]
	return k, nil
}

// FuzzShrink: a valid result, cut, is valid JSON that go-sdk decodes as a
// CallToolResult when the whole decodes as one, each of its texts a
// prefix of the whole's, and the count of the whole's rendering, when
// given, is RenderResult's.
func FuzzShrink(f *testing.F) {
	for _, s := range []string{
		`{"content":[{"type":"text","text":"hello world, a long text"}]}`,
		`{"content":[{"type":"text","text":"a\n\u00e9\ud83d\ude00"},{"type":"text","text":"b"}],"isError":true}`,
		`{"content":[{"type":"image","data":"QUJDREVGR0g=","mimeType":"img"}]}`,
		`{"content":[],"structuredContent":{"a":[1,2,{"b":"cccccccccccc"}],"d":null}}`,
		`{"content":[{"type":"resource","resource":{"uri":"x","text":"yyyyyyyyyyyy"}}],"_meta":{"k":"v"}}`,
		"{\"content\":[{\"type\":\"text\",\"text\":\"\xff\xe2\x82 \\ud800\"}]}",
	} {
		f.Add(s, uint8(3))
	}
	f.Fuzz(func(t *testing.T, result string, step uint8) {
		msg := resp(result)
		if !json.Valid([]byte(msg)) {
			return
		}
		lim := shrinkLimits{keep: 5, total: 60, structured: 40, meta: 30}
		got, _, tr, err := shrinkAll(msg, lim, int(step)+1)
		if err != nil {
			if depth(msg) <= maxDepth && len(msg) <= maxKey {
				t.Fatalf("refused a valid message: %s", msg)
			}
			return
		}
		if !json.Valid(got) {
			t.Fatalf("not valid JSON:\n%s\nfrom\n%s", got, msg)
		}
		var whole mcp.CallToolResult
		if json.Unmarshal([]byte(result), &whole) != nil {
			return
		}
		cut := decodeResult(t, got)
		if tr.Chars >= 0 {
			if n := guard.RenderResult(&whole, 0).Chars; int64(n) != tr.Chars {
				t.Fatalf("RenderResult counts %d characters, the shrinker %d: %s", n, tr.Chars, msg)
			}
		}
		if len(cut.Content) > len(whole.Content) {
			t.Fatalf("%d blocks of %d", len(cut.Content), len(whole.Content))
		}
		for i, c := range cut.Content {
			if ct, ok := c.(*mcp.TextContent); ok {
				wt, ok := whole.Content[i].(*mcp.TextContent)
				if !ok || !strings.HasPrefix(wt.Text, ct.Text) || utf8.RuneCountInString(ct.Text) > lim.keep {
					t.Fatalf("block %d: %q of %q", i, ct.Text, fmt.Sprint(whole.Content[i]))
				}
			}
		}
	})
}

// depth is the deepest nesting of arrays and objects in a JSON text.
func depth(s string) int {
	var v any
	_ = json.Unmarshal([]byte(s), &v)
	var d func(any) int
	d = func(v any) int {
		n := 0
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				n = max(n, d(e))
			}
			return n + 1
		case map[string]any:
			for _, e := range x {
				n = max(n, d(e))
			}
			return n + 1
		}
		return 0
	}
	return d(v)
}

// BenchmarkShrink: the shrinker's throughput over a text result (most of
// it skipped, counted), in 64 KiB pieces as frameCap feeds it, beside
// json.Valid over the same bytes in the same run (one validating pass:
// the least a check of the stream costs).
func BenchmarkShrink(b *testing.B) {
	for _, tc := range []struct{ name, text string }{
		{"ascii", strings.Repeat("x", 16<<20)},
		{"utf8", strings.Repeat("é中x", 16<<20/6)},
		{"escapes", strings.Repeat(`a\n\"\u00e9`, 16<<20/12)},
	} {
		msg := []byte(resp(`{"content":[{"type":"text","text":"` + tc.text + `"}]}`))
		b.Run(tc.name+"/baseline=json.Valid", func(b *testing.B) { // one validating pass over the same bytes
			b.SetBytes(int64(len(msg)))
			for b.Loop() {
				if !json.Valid(msg) {
					b.Fatal("invalid")
				}
			}
		})
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(msg)))
			for b.Loop() {
				s := newShrinker(shrinkLimitsFor(guard.DefaultMaxResultChars))
				for i := 0; i < len(msg); i += 64 << 10 {
					if err := s.write(msg[i:min(i+64<<10, len(msg))]); err != nil {
						b.Fatal(err)
					}
				}
				if _, _, _, err := s.finish(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
