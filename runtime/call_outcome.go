package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
)

// ---- a call's outcome: classified, rendered, and journaled on call.finished ----

// outcome classifies a call's result or error onto fin and returns what
// the caller gets.
func (m *Manager) outcome(ctx context.Context, cl *call, c *conn, res *mcp.CallToolResult, err error,
	timeout time.Duration, fin *events.CallFinished) (*mcp.CallToolResult, error, lostInfo) {
	name, server, tool := cl.name, cl.entry.Server, cl.entry.Tool
	switch {
	case err == nil && unknownToolResult(res, tool):
		fin.Outcome, fin.Error = events.OutcomeUnknownTool, firstText(res)
		c.requestRelist("refresh")
		return res, fmt.Errorf("%w: server %q says it has no tool %q (its tools are being re-listed): %s", ErrUnknownTool, server, tool, firstText(res)), lostInfo{}
	case err == nil && res.IsError:
		fin.Outcome = events.OutcomeToolError
		return res, nil, lostInfo{}
	case err == nil:
		fin.Outcome = events.OutcomeOK
		return res, nil, lostInfo{}
	case m.callCtx.Err() != nil:
		fin.Outcome, fin.Error = events.OutcomeError, "shutting down"
		return res, ErrShuttingDown, lostInfo{}
	case ctx.Err() != nil:
		fin.Outcome, fin.Error = events.OutcomeCancelled, "cancelled by the caller: "+ctx.Err().Error()
		return res, fmt.Errorf("runtime: %s: cancelled by the caller: %w", name, ctx.Err()), lostInfo{}
	case errors.Is(err, context.DeadlineExceeded):
		fin.Outcome, fin.Error = events.OutcomeTimeout, fmt.Sprintf("no result within %s", timeout)
		return res, fmt.Errorf("runtime: %s timed out after %s: %w", name, timeout, err), lostInfo{}
	case tooLarge(err):
		je, _ := protocolError(err)
		fin.Outcome, fin.Error = events.OutcomeError, je.Message
		return nil, fmt.Errorf("%w: %s: %s", ErrResultTooLarge, name, je.Message), lostInfo{}
	case unknownToolError(err):
		fin.Outcome, fin.Error = events.OutcomeUnknownTool, err.Error()
		c.requestRelist("refresh")
		return nil, fmt.Errorf("%w: server %q says it has no tool %q (its tools are being re-listed): %w", ErrUnknownTool, server, tool, err), lostInfo{}
	case errors.Is(err, mcp.ErrConnectionClosed):
		// go-sdk refuses to write a call once the connection is closing:
		// the request never left.
		fin.Outcome, fin.Error = events.OutcomeError, "the connection had closed; the request was not sent: "+err.Error()
		return nil, fmt.Errorf("runtime: %s: the connection to %q had closed; the request was not sent: %w", name, server, err),
			lostInfo{retriable: true, undelivered: true}
	case connectionLost(err):
		fin.Outcome, fin.Error = events.OutcomeLost, "connection lost with the request in flight; the outcome is unknown: "+err.Error()
		return nil, fmt.Errorf("%w: %s: the connection to %q was lost with the request in flight; the server may or may not have acted on it: %w",
			ErrOutcomeUnknown, name, server, err), lostInfo{retriable: true}
	}
	fin.Outcome, fin.Error = events.OutcomeError, err.Error()
	return res, fmt.Errorf("runtime: %s: %w", name, err), lostInfo{}
}

// unknownToolError reports whether err is a live server's JSON-RPC
// "unknown tool" (go-sdk: -32602, `unknown tool "x"`).
func unknownToolError(err error) bool {
	je, ok := protocolError(err)
	return ok && je.Code == -32602 && strings.Contains(strings.ToLower(je.Message), "unknown tool")
}

// unknownToolResult reports whether res is the TypeScript SDK's isError
// result for an unknown tool ("MCP error -32602: Tool x not found").
func unknownToolResult(res *mcp.CallToolResult, tool string) bool {
	if res == nil || !res.IsError || len(res.Content) != 1 {
		return false
	}
	t := strings.ToLower(firstText(res))
	if len(t) > 512 {
		return false
	}
	return strings.Contains(t, "tool "+strings.ToLower(tool)+" not found") ||
		strings.Contains(t, "unknown tool") && strings.Contains(t, "-32602")
}

func firstText(res *mcp.CallToolResult) string {
	if res != nil && len(res.Content) > 0 {
		if t, ok := res.Content[0].(*mcp.TextContent); ok {
			return t.Text
		}
	}
	return ""
}

// finish renders the result, scans it, journals call.finished and
// answers the caller.
func (m *Manager) finish(cl *call, res *mcp.CallToolResult, err error, fin *events.CallFinished) (*CallResult, error) {
	out := &CallResult{CallID: cl.id, Result: res}
	if res != nil {
		out.Rendered = RenderResult(res, m.opts.MaxResultChars)
		out.Signals = DetectInjection(out.Text)
		fin.Signals, fin.RenderedChars, fin.CutChars = out.Signals, int64(out.Chars), int64(out.Cut)
		if cl.opts.Wrap || m.opts.WrapOutput {
			out.Text = WrapOutput(cl.entry.Server, cl.entry.Tool, out.Text)
		}
		fin.Result = blobOf(cl.red.redact(resultJSON(res)), m.opts.JournalCap)
		if len(out.Signals) > 0 {
			m.log.Warn("possible prompt injection in tool output (advisory)", "server", cl.entry.Server,
				"tool", cl.entry.Tool, "signals", out.Signals)
		}
	}
	fin.Error = string(cl.red.redact([]byte(fin.Error)))
	// The result is journaled even if the caller has gone: use a context
	// that outlives ctx (but not the manager).
	if _, jerr := m.submit(m.ctx, cl.entry.Server, fin, cl.durable); jerr != nil && err == nil {
		return out, jerr
	}
	if res == nil && err != nil {
		return nil, err
	}
	return out, err
}

// blobOf caps a JSON text for the journal, keeping its size and hash.
func blobOf(b []byte, limit int) events.Blob {
	sum := sha256.Sum256(b)
	bl := events.Blob{Size: int64(len(b)), SHA256: hex.EncodeToString(sum[:])}
	if len(b) > limit {
		bl.Text, bl.Truncated = string(b[:limit]), true
	} else {
		bl.Text = string(b)
	}
	return bl
}

// resultJSON encodes res for the journal: the shape of its MarshalJSON,
// but text blocks are written directly, because go-sdk's MarshalJSON
// re-compacts every block (about 200 µs for 10 KB of text).
func resultJSON(res *mcp.CallToolResult) []byte {
	b := make([]byte, 0, 64+len(firstText(res))*11/10)
	b = append(b, `{"content":[`...)
	for i, c := range res.Content {
		if i > 0 {
			b = append(b, ',')
		}
		if t, ok := c.(*mcp.TextContent); ok && t.Meta == nil && t.Annotations == nil {
			b = append(b, `{"type":"text","text":`...)
			b = appendJSONString(b, t.Text)
			b = append(b, '}')
			continue
		}
		cb, err := json.Marshal(c)
		if err != nil {
			cb, _ = json.Marshal(map[string]string{"error": err.Error()})
		}
		b = append(b, cb...)
	}
	b = append(b, ']')
	if res.StructuredContent != nil {
		if sb, err := json.Marshal(res.StructuredContent); err == nil {
			b = append(b, `,"structuredContent":`...)
			b = append(b, sb...)
		}
	}
	if res.IsError {
		b = append(b, `,"isError":true`...)
	}
	if res.Meta != nil {
		if mb, err := json.Marshal(res.Meta); err == nil {
			b = append(b, `,"_meta":`...)
			b = append(b, mb...)
		}
	}
	return append(b, '}')
}

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 replaced with U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, s[start:i]...)
				b = append(b, `\ufffd`...)
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
