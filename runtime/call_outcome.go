package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime/config"
	"github.com/mcpledger/mcpledger/runtime/guard"
	"github.com/mcpledger/mcpledger/runtime/internal/swar"
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

// resultLimit is the result bound of a server with settings s, def the
// Manager's (0: no bound).
func resultLimit(def int, s config.CallSettings) int {
	if n := s.MaxResultChars; n != nil {
		return *n
	}
	return def
}

// finish renders the result, scans it, journals call.finished and
// answers the caller. raw is the result as the server sent it (see
// wireTransport), nil when the transport does not keep it: the journal
// then gets res re-encoded. transit, when set, says the result was cut
// in transit (frameCap) and how large it was.
func (m *Manager) finish(cl *call, res *mcp.CallToolResult, raw []byte, transit *guard.Transit, err error, fin *events.CallFinished) (*CallResult, error) {
	out := &CallResult{CallID: cl.id, Result: res}
	if res != nil {
		limit := resultLimit(m.opts.MaxResultChars, cl.settings)
		if transit != nil {
			out.Rendered = guard.RenderTransit(res, limit, *transit)
			fin.WireBytes = transit.Bytes
		} else {
			out.Rendered = guard.RenderResult(res, limit)
		}
		out.Bounded = guard.BoundResult(res, out.Rendered, limit)
		out.Signals = guard.DetectInjection(out.Text)
		fin.Signals, fin.RenderedChars, fin.CutChars = out.Signals, int64(out.Chars), int64(out.Cut)
		if cl.opts.Wrap || m.opts.WrapOutput {
			out.Text = guard.WrapOutput(cl.entry.Server, cl.entry.Tool, out.Text)
		}
		if raw == nil {
			raw = resultJSON(res)
		}
		fin.Result = blobOfOwned(cl.red.Redact(raw), m.opts.JournalCap)
		if len(out.Signals) > 0 {
			m.log.Warn("possible prompt injection in tool output (advisory)", "server", cl.entry.Server,
				"tool", cl.entry.Tool, "signals", out.Signals)
		}
	}
	fin.Error = string(cl.red.Redact([]byte(fin.Error)))
	// The result is journaled even if the caller has gone: use a context
	// that outlives ctx (but not the manager).
	if _, jerr := m.submit(m.ctx, cl.entry.Server, fin, cl.durable); jerr != nil && err == nil {
		return nil, jerr // not durable: nothing is shown as done (a front end shows any result it gets)
	}
	if res == nil && err != nil {
		return nil, err
	}
	return out, err
}

// blobOf caps a JSON text for the journal. A text cut at the cap keeps
// the size and SHA-256 of the whole, so the cut text can still be matched
// to what the server sent; a whole text is its own digest, and hashing
// it (about 0.6 µs per KB) would buy nothing.
func blobOf(b []byte, limit int) events.Blob {
	bl := events.Blob{Size: int64(len(b))}
	if len(b) > limit {
		sum := sha256.Sum256(b)
		bl.SHA256 = hex.EncodeToString(sum[:])
		bl.Text, bl.Truncated = string(b[:limit]), true
	} else {
		bl.Text = string(b)
	}
	return bl
}

// blobOfOwned is blobOf for a b that nothing else holds or will change
// (a result's JSON as resultJSON and the guard.Redactor return it): when it
// fits, the blob's text is b itself, not a copy. (A truncated text is
// copied, so as not to hold all of b.)
func blobOfOwned(b []byte, limit int) events.Blob {
	if len(b) > limit || len(b) == 0 {
		return blobOf(b, limit)
	}
	return events.Blob{Size: int64(len(b)), Text: unsafe.String(&b[0], len(b))}
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
//
// It finds the bytes that need a look 64 at a time (jsonAttention, eight
// bytes per step, no branch per byte), then copies the runs between them
// with word stores into spare capacity.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	out, o := b[:cap(b)], len(b)
	w, next := 0, 0 // s[:w] is written, s[:next] looked at
	for base := 0; base < len(s); base += 64 {
		var m uint64
		k := 0
		for ; k < 64 && base+k+8 <= len(s); k += 8 {
			m |= swar.Gather(jsonAttention(swar.Load64(s, base+k))) << k
		}
		for ; k < 64 && base+k < len(s); k++ {
			if c := s[base+k]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
				m |= 1 << k
			}
		}
		for ; m != 0; m &= m - 1 {
			p := base + bits.TrailingZeros64(m)
			if p < next {
				continue // inside a character kept whole
			}
			c := s[p]
			if c >= utf8.RuneSelf {
				if r, size := utf8.DecodeRuneInString(s[p:]); r != utf8.RuneError || size > 1 {
					next = p + size // valid: written with the run
					continue
				}
			}
			// Room for the rest unescaped, this escape and word stores.
			if need := o + len(s) - w + 24; need > len(out) {
				out = slices.Grow(out[:o], need-o)
				out = out[:cap(out)]
			}
			if n := p - w; n <= 16 && w+16 <= len(s) {
				binary.LittleEndian.PutUint64(out[o:o+8], swar.Load64(s, w))
				binary.LittleEndian.PutUint64(out[o+8:o+16], swar.Load64(s, w+8))
				o += n
			} else {
				o += copy(out[o:], s[w:p])
			}
			w, next = p+1, p+1
			if c >= utf8.RuneSelf { // invalid
				o += copy(out[o:], `\ufffd`)
				continue
			}
			out[o] = '\\'
			switch c {
			case '"', '\\':
				out[o+1] = c
			case '\n':
				out[o+1] = 'n'
			case '\r':
				out[o+1] = 'r'
			case '\t':
				out[o+1] = 't'
			default:
				out[o+1], out[o+2], out[o+3], out[o+4], out[o+5] = 'u', '0', '0', hex[c>>4], hex[c&0xf]
				o += 4
			}
			o += 2
		}
	}
	out = append(out[:o], s[w:]...)
	return append(out, '"')
}

// jsonAttention sets the high bit of each byte of x that appendJSONString
// must look at: a control character, '"', '\\', or a byte of a non-ASCII
// character.
func jsonAttention(x uint64) uint64 {
	// On the low 7 bits of each byte (none of these sums leaves its
	// byte), the high bit of y+0x60 is set for 0x20 and up, that of
	// (y^c)+0x7f for bytes other than c.
	y := x &^ swar.High
	fine := (y + 0x6060606060606060) & ((y ^ 0x2222222222222222) + 0x7f7f7f7f7f7f7f7f) &
		((y ^ 0x5c5c5c5c5c5c5c5c) + 0x7f7f7f7f7f7f7f7f)
	return (x | ^fine) & swar.High
}
