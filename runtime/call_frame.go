package runtime

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// DefaultMaxMessageBytes bounds one message from a stdio server: go-sdk's
// own DefaultMaxLineLength (16 MiB).
const DefaultMaxMessageBytes = 16 << 20

// codeTooLarge is the JSON-RPC error code of the response frameCap puts in
// place of an oversized one (in the implementation-defined server-error
// range).
const codeTooLarge = -32050

// frameCap passes newline-delimited JSON-RPC messages through, holding at
// most max bytes of one message. A longer message is read through and
// discarded as it streams, keeping only its first and last few bytes, so
// memory stays bounded whatever the server sends (a 100 MB result costs
// about max, not 100 MB, plus go-sdk's copy of what passes). If the
// discarded message was a response, frameCap answers its request in its
// place with a JSON-RPC error (codeTooLarge) saying how large it was: the
// one call fails with ErrResultTooLarge and the session stays up, where
// go-sdk's own limit would end the session. Any other oversized message
// (a notification, a request) is dropped and reported.
//
// An oversized response to a tools/call a caller waits on (one of calls)
// is cut instead, as it streams (shrinker): its call gets a small valid
// result, marked as cut with the size the server sent (on its wireSink).
// A response the shrinker refuses (not valid JSON, or too odd to cut) is
// discarded and answered as above.
//
// go-sdk's IOTransport is then given MaxLineLength -1: frameCap is the
// limit.
type frameCap struct {
	r       io.ReadCloser
	max     int
	dropped func(size int64, answered bool)
	// calls, when set, are the calls whose oversized responses are cut
	// in transit, limits the bound (a result's maxResultChars) they are
	// cut for, and cut reports each.
	calls  *wireCalls
	limits func() shrinkLimits
	cut    func(size int64, kept int)
	shr    *shrinker // cutting the current message
	whole  bool      // the stream is one message (an HTTP body): EOF ends it

	chunk   []byte
	line    []byte // the message being accumulated
	spare   []byte // the buffer of the last oversized message, while others follow it
	out     []byte // ready for the reader
	discard bool   // the current message is over max
	size    int64  // bytes of the current message so far
	head    []byte // its first bytes, when discarding
	tail    []byte // its last bytes, when discarding
	err     error
}

const capKeep = 512 // bytes kept of each end of a discarded message

func newFrameCap(r io.ReadCloser, max int, dropped func(size int64, answered bool)) *frameCap {
	return &frameCap{r: r, max: max, dropped: dropped, chunk: make([]byte, 64<<10)}
}

func (f *frameCap) Read(p []byte) (int, error) {
	for len(f.out) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		n, err := f.r.Read(f.chunk)
		f.feed(f.chunk[:n])
		if err != nil {
			switch {
			case len(f.line) > 0 && !f.discard: // a last message without newline
				f.out = append(f.out, f.line...)
				f.line = nil
			case f.discard && f.whole && errors.Is(err, io.EOF): // an HTTP body: its end ends it
				f.endOversized()
			}
			f.err = err
		}
	}
	return takeOut(p, &f.out), nil
}

// takeOut copies what it can of *out into p and drops it from *out,
// releasing a large buffer once drained: the end of frameCap's and
// sseCap's Read.
func takeOut(p []byte, out *[]byte) int {
	n := copy(p, *out)
	*out = (*out)[n:]
	if len(*out) == 0 {
		*out = (*out)[:0:0]
	}
	return n
}

func (f *frameCap) Close() error { return f.r.Close() }

// feed consumes bytes read from the server.
func (f *frameCap) feed(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		piece := b
		if i >= 0 {
			piece = b[:i+1]
		}
		b = b[len(piece):]
		f.size += int64(len(piece))
		switch {
		case f.discard:
			f.keepTail(piece)
			f.shrink(piece)
		case len(f.line)+len(piece) > f.max:
			// Over the limit: keep the ends, drop the rest, without
			// growing the buffer once more.
			f.discard = true
			if f.calls != nil && f.limits != nil {
				f.shr = newShrinker(f.limits())
				f.shrink(f.line)
			}
			f.head = append(f.head[:0], f.line[:min(capKeep, len(f.line))]...)
			if n := capKeep - len(f.head); n > 0 {
				f.head = append(f.head, piece[:min(n, len(piece))]...)
			}
			f.tail = append(f.tail[:0], f.line[max(0, len(f.line)-capKeep):]...)
			f.keepTail(piece)
			f.shrink(piece)
			if cap(f.line) >= f.max {
				f.spare = f.line[:0] // for the next oversized message, if one follows
			}
			f.line = nil
		default:
			if need := len(f.line) + len(piece); need > cap(f.line) && need > 1<<20 {
				// A large message: room for all it may take, once, rather
				// than a trail of ever larger copies (pages not written to
				// are not resident).
				buf := f.spare
				if cap(buf) < f.max {
					buf = make([]byte, 0, f.max)
				}
				f.line, f.spare = append(buf[:0], f.line...), nil
			}
			f.line = append(f.line, piece...)
		}
		if i < 0 {
			return
		}
		// End of a message.
		if f.discard {
			f.endOversized()
			continue
		}
		f.out = append(f.out, f.line...)
		if cap(f.line) > 1<<20 {
			f.line = nil
		} else {
			f.line = f.line[:0]
		}
		f.size, f.spare = 0, nil // a message within the limit ends a run of oversized ones

	}
}

// endOversized passes on the cut message in place of an oversized one,
// or answers its request.
func (f *frameCap) endOversized() {
	if f.shr == nil || !f.passCut() {
		f.answer()
	}
	f.discard, f.size, f.shr = false, 0, nil
}

// shrink feeds the shrinker a piece of the message (without its newline)
// and gives it up at its first refusal.
func (f *frameCap) shrink(b []byte) {
	if f.shr == nil {
		return
	}
	if f.shr.write(bytes.TrimSuffix(b, []byte("\n"))) != nil {
		f.shr = nil
	}
}

// passCut passes on the cut message in place of the whole, if it is a
// response to one of calls, and says so on the call's sink.
func (f *frameCap) passCut() bool {
	msg, id, t, err := f.shr.finish()
	if err != nil || !f.calls.cutInTransit(id, t) {
		return false
	}
	if f.cut != nil {
		f.cut(f.size, len(msg))
	}
	f.out = append(append(f.out, msg...), '\n')
	return true
}

func (f *frameCap) keepTail(b []byte) {
	if len(b) >= capKeep {
		f.tail = append(f.tail[:0], b[len(b)-capKeep:]...)
		return
	}
	f.tail = append(f.tail, b...)
	if len(f.tail) > capKeep {
		f.tail = append(f.tail[:0], f.tail[len(f.tail)-capKeep:]...)
	}
}

// answer replaces a discarded response with an error response to the
// same request.
func (f *frameCap) answer() {
	id, ok := responseID(f.head, f.tail)
	if f.dropped != nil {
		f.dropped(f.size, ok)
	}
	if !ok {
		return
	}
	resp := &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: codeTooLarge,
		Message: fmt.Sprintf("mcpledger: the response was %d bytes, over the %d-byte limit (MaxMessageBytes); it was discarded", f.size, f.max)}}
	b, err := jsonrpc.EncodeMessage(resp)
	if err != nil {
		return
	}
	f.out = append(append(f.out, b...), '\n')
}

// responseID finds the id of a response from its first and last bytes:
// go-sdk writes {"jsonrpc":"2.0","id":7,"result":…}, the TypeScript SDK
// {"result":…,"jsonrpc":"2.0","id":7}. A message that is not plainly a
// response (a request or notification: it has a "method") gives false.
func responseID(head, tail []byte) (jsonrpc.ID, bool) {
	h := bytes.TrimLeft(head, " \t\r")
	switch {
	case bytes.HasPrefix(h, []byte(`{"jsonrpc":"2.0","id":`)):
		rest := h[len(`{"jsonrpc":"2.0","id":`):]
		v, after, ok := scanID(rest)
		if ok && (bytes.HasPrefix(after, []byte(`,"result":`)) || bytes.HasPrefix(after, []byte(`,"error":`))) {
			return makeID(v)
		}
	case bytes.HasPrefix(h, []byte(`{"result":`)), bytes.HasPrefix(h, []byte(`{"error":`)):
		t := bytes.TrimRight(tail, " \t\r\n")
		k := bytes.LastIndex(t, []byte(`"id":`))
		if k < 0 || !bytes.HasSuffix(t, []byte("}")) {
			break
		}
		v, after, ok := scanID(t[k+len(`"id":`):])
		if ok && bytes.Equal(bytes.TrimSpace(after), []byte("}")) {
			return makeID(v)
		}
	}
	return jsonrpc.ID{}, false
}

// scanID reads a JSON number or string at the start of b.
func scanID(b []byte) (v any, rest []byte, ok bool) {
	b = bytes.TrimLeft(b, " ")
	if len(b) == 0 {
		return nil, nil, false
	}
	if b[0] == '"' {
		end := bytes.IndexByte(b[1:], '"')
		if end < 0 {
			return nil, nil, false
		}
		return string(b[1 : 1+end]), b[end+2:], true
	}
	end := 0
	for end < len(b) && (b[end] >= '0' && b[end] <= '9' || b[end] == '-') {
		end++
	}
	n, err := strconv.ParseInt(string(b[:end]), 10, 64)
	if err != nil {
		return nil, nil, false
	}
	return n, b[end:], true
}

func makeID(v any) (jsonrpc.ID, bool) {
	if n, ok := v.(int64); ok {
		v = float64(n)
	}
	id, err := jsonrpc.MakeID(v)
	return id, err == nil
}

// tooLarge reports whether err is frameCap's answer to an oversized
// response.
func tooLarge(err error) bool {
	var je *jsonrpc.Error
	return errors.As(err, &je) && je.Code == codeTooLarge
}
