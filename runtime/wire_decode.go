package runtime

import (
	"encoding/json"

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

// decodeTextResult decodes the commonest tools/call result, text blocks
// and nothing else ({"content":[{"type":"text","text":"…"},…]} with an
// optional "isError"), into what go-sdk would decode from it; it returns
// nil for anything else, which go-sdk then decodes as ever. What it
// decodes, go-sdk does not decode at all (errDecodedHere).
//
// Why: go-sdk decodes a result once as a whole and once per content block,
// each time with a fresh decoder that allocates and clears a 32 KiB
// buffer; for a short text that was a tenth of a gateway's CPU per call
// (BENCHMARKS.md, "Gateway"). Keys are matched exactly (go-sdk's decoder
// does not fold case either): a result with any other key, or a block of
// any other type or with other keys (annotations, _meta), is left to
// go-sdk.
func decodeTextResult(raw []byte) *mcp.CallToolResult {
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil {
		return nil
	}
	content, ok := top["content"]
	if !ok || len(top) > 2 {
		return nil
	}
	res := &mcp.CallToolResult{}
	if ie, ok := top["isError"]; ok {
		if len(top) != 2 || json.Unmarshal(ie, &res.IsError) != nil {
			return nil
		}
	} else if len(top) != 1 {
		return nil
	}
	var blocks []map[string]json.RawMessage
	if json.Unmarshal(content, &blocks) != nil || blocks == nil {
		return nil
	}
	res.Content = make([]mcp.Content, len(blocks))
	for i, b := range blocks {
		text, ok := b["text"]
		if len(b) != 2 || !ok || string(b["type"]) != `"text"` {
			return nil
		}
		tc := &mcp.TextContent{}
		if json.Unmarshal(text, &tc.Text) != nil {
			return nil
		}
		res.Content[i] = tc
	}
	return res
}
