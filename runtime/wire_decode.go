package runtime

import (
	"encoding/json"

	"github.com/mcpledger/mcpledger/runtime/internal/sdkjson"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// errDecodedHere is the response go-sdk is given in place of a result
// decodeTextResult decoded: an error, which go-sdk passes on without
// decoding anything. The call path replaces it with the decoded result
// (send); it never reaches a caller or the journal.
var errDecodedHere = &jsonrpc.Error{Code: codeDecodedHere, Message: "mcpledger: result decoded by the runtime"}

// codeDecodedHere is errDecodedHere's code (implementation-defined
// server-error range, beside frameCap's codeTooLarge).
const codeDecodedHere = -32051

// completeResult is an empty result of resultType "complete", as go-sdk
// decodes one (it keeps the type in an unexported field, which only its
// decoder sets): decodeTextResult starts from a copy of it.
var completeResult = func() mcp.CallToolResult {
	var r mcp.CallToolResult
	if err := json.Unmarshal([]byte(`{"content":[],"resultType":"complete"}`), &r); err != nil {
		panic("runtime: go-sdk does not decode a complete result: " + err.Error())
	}
	r.Content = nil
	return r
}()

// decodeTextResult decodes the commonest tools/call result, text blocks
// and nothing else ({"content":[{"type":"text","text":"…"},…]} with an
// optional "isError", and, as a 2026-07-28 server sends it, an optional
// "_meta" and "resultType":"complete"), into what go-sdk would decode from
// it; it returns nil for anything else, which go-sdk then decodes as ever.
// What it decodes, go-sdk does not decode at all (errDecodedHere).
//
// Why: go-sdk decodes a result once as a whole and once per content block,
// each time with a fresh decoder that allocates and clears a 32 KiB
// buffer; for a short text that was a tenth of a gateway's CPU per call
// (BENCHMARKS.md, "Gateway"). Keys are matched exactly (go-sdk's decoder
// does not fold case either): a result with any other key or another
// resultType (input_required is go-sdk's to handle), or a block of any
// other type or with other keys (annotations, _meta), is left to go-sdk.
func decodeTextResult(raw []byte) *mcp.CallToolResult {
	var top sdkjson.Object
	if sdkjson.Unmarshal(raw, &top) != nil {
		return nil
	}
	content, ok := top["content"]
	if !ok {
		return nil
	}
	res := &mcp.CallToolResult{}
	if _, ok := top["resultType"]; ok {
		*res = completeResult // its resultType is unexported
	}
	for k, v := range top {
		switch k {
		case "content":
		case "isError":
			if sdkjson.Unmarshal(v, &res.IsError) != nil {
				return nil
			}
		case "_meta":
			// Into a map made here: segmentio's decoder makes a nil map
			// with room for 64 members (a 2026-07-28 server's one member,
			// its serverInfo, cost 5.4 KB and about 4 µs to decode that way, 0.8 KB
			// and about 1.4 µs into a map made for it: sdkjson.BenchmarkUnmarshalMeta).
			res.Meta = make(mcp.Meta, 1)
			if sdkjson.Unmarshal(v, &res.Meta) != nil {
				return nil
			}
		case "resultType":
			if string(v) != `"complete"` {
				return nil
			}
		default:
			return nil
		}
	}
	var blocks []sdkjson.Object
	if sdkjson.Unmarshal(content, &blocks) != nil || blocks == nil {
		return nil
	}
	res.Content = make([]mcp.Content, len(blocks))
	for i, b := range blocks {
		text, ok := b["text"]
		if len(b) != 2 || !ok || string(b["type"]) != `"text"` {
			return nil
		}
		tc := &mcp.TextContent{}
		if sdkjson.Unmarshal(text, &tc.Text) != nil {
			return nil
		}
		res.Content[i] = tc
	}
	return res
}
