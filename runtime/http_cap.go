package runtime

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// ---- an HTTP server's oversized result, cut as it streams ----

// capTransport bounds the answer to a tool call from a Streamable HTTP or
// SSE server as frameCap bounds a stdio server's messages: a response over
// max bytes is cut as it streams (shrinker) and the call's wireSink says
// so; one that cannot be cut is answered with codeTooLarge. The POST of a
// tools/call made with a sink (the Manager's calls) registers the call in
// calls before it leaves; its answer is then cut whether it comes as the
// POST's JSON body or as an event of any SSE stream of the connection (the
// POST's own, the standalone GET stream, an SSE server's one stream).
// go-sdk's client would otherwise read a JSON body whole, with no limit,
// and fail an SSE stream whose event is over 16 MiB.
type capTransport struct {
	base   http.RoundTripper
	max    int
	limits func() shrinkLimits
	cut    func(size int64, kept int)
	calls  *wireCalls
	spare  spareBuf
	// listenEnded, if set, is called when go-sdk's subscriptions/listen
	// stream ends (or is refused) while its request still runs.
	listenEnded func()
}

// spareBuf holds the buffer of a connection's last oversized event while
// oversized events follow one another, so that the next one (on any of its
// streams; a call's answer comes on its POST's own) reuses it instead of
// making another max bytes.
type spareBuf struct {
	mu sync.Mutex
	b  []byte
}

func (p *spareBuf) take() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.b
	p.b = nil
	return b
}

func (p *spareBuf) keep(b []byte) {
	p.mu.Lock()
	p.b = b[:0]
	p.mu.Unlock()
}

func (p *spareBuf) drop() {
	p.mu.Lock()
	p.b = nil
	p.mu.Unlock()
}

func (t *capTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	call := false
	if sink, _ := req.Context().Value(wireSinkKey{}).(*wireSink); sink != nil && req.Method == http.MethodPost {
		if id, ok := toolCallID(req); ok {
			t.calls.add(id, sink)
			call = true
		}
	}
	listen := t.listenEnded != nil && req.Header.Get("Mcp-Method") == methodListen
	resp, err := t.base.RoundTrip(req)
	if listen && (err != nil || resp.StatusCode != http.StatusOK) && req.Context().Err() == nil {
		t.listenEnded()
	}
	if err != nil {
		return resp, err
	}
	switch mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); {
	case mt == "application/json" && call:
		f := newFrameCap(resp.Body, t.max, nil)
		f.calls, f.limits, f.cut, f.whole = t.calls, t.limits, t.cut, true
		resp.Body = f
	case mt == "text/event-stream":
		resp.Body = &sseCap{r: resp.Body, max: t.max, calls: t.calls, limits: t.limits, cut: t.cut, chunk: make([]byte, 64<<10), spare: &t.spare}
	}
	if listen {
		resp.Body = &listenBody{ReadCloser: resp.Body, ctx: req.Context(), ended: t.listenEnded}
	}
	return resp, nil
}

// toolCallID returns the id of the tools/call request req posts.
func toolCallID(req *http.Request) (jsonrpc.ID, bool) {
	if req.GetBody == nil {
		return jsonrpc.ID{}, false
	}
	body, err := req.GetBody()
	if err != nil {
		return jsonrpc.ID{}, false
	}
	defer body.Close()
	var m struct {
		ID     any    `json:"id"`
		Method string `json:"method"`
	}
	if json.NewDecoder(body).Decode(&m) != nil || m.Method != "tools/call" || m.ID == nil {
		return jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(m.ID)
	return id, err == nil
}

// sseCap passes an SSE stream through, an event at a time, holding at
// most max bytes of one; the data of a longer event is cut as frameCap
// cuts a message (the event's other fields kept), or, if it cannot be,
// replaced by the answer frameCap gives. An event is a run of lines ended
// by an empty one; its data lines ("data:" and the value, one leading
// space dropped) are its message, joined with newlines.
type sseCap struct {
	r      io.ReadCloser
	max    int
	calls  *wireCalls
	limits func() shrinkLimits
	cut    func(size int64, kept int)
	chunk  []byte
	out    []byte
	err    error

	ev    []byte    // the event so far, while it is within max
	spare *spareBuf // shared by the connection's streams
	size  int64     // its bytes
	line  int       // bytes of the current line so far
	over  bool      // the event is over max: it is being cut

	// While over: the current line's state and the event's other fields.
	name       []byte // the field name, up to 64 bytes
	in         int    // 0 the name, 1 a data value, 2 another value, 3 a value skipped, 4 the space after "data:"
	fields     []byte // the event's other field lines, up to 1 KiB
	data       bool   // a data line was seen
	shr        *shrinker
	head, tail []byte // the first and last bytes of the data
}

func (s *sseCap) Read(p []byte) (int, error) {
	for len(s.out) == 0 {
		if s.err != nil {
			return 0, s.err
		}
		n, err := s.r.Read(s.chunk)
		s.feed(s.chunk[:n])
		if err != nil {
			if len(s.ev) > 0 && !s.over { // an event the stream ended in
				s.out = append(s.out, s.ev...)
			}
			s.err = err
		}
	}
	return takeOut(p, &s.out), nil
}

func (s *sseCap) Close() error { return s.r.Close() }

// feed consumes bytes of the stream.
func (s *sseCap) feed(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		piece := b
		if i >= 0 {
			piece = b[:i+1]
		}
		b = b[len(piece):]
		s.size += int64(len(piece))
		content := len(piece) - bytes.Count(piece, []byte("\r")) - min(i+1, 1) // bytes of the line but CRs and its newline
		blank := i >= 0 && s.line+content == 0
		switch {
		case s.over:
			s.cutting(piece)
		case len(s.ev)+len(piece) > s.max:
			s.over = true
			s.shr = newShrinker(s.limits())
			ev := s.ev
			s.ev = nil
			s.cutting(ev)
			s.cutting(piece)
			if cap(ev) >= s.max {
				s.spare.keep(ev) // for the next oversized event, on this stream or another
			}
		default:
			if need := len(s.ev) + len(piece); need > cap(s.ev) && need > 1<<20 {
				buf := s.spare.take() // once, as frameCap does
				if cap(buf) < s.max {
					buf = make([]byte, 0, s.max)
				}
				s.ev = append(buf[:0], s.ev...)
			}
			s.ev = append(s.ev, piece...)
		}
		s.line += content
		if i < 0 {
			continue
		}
		s.line = 0
		if !blank {
			continue
		}
		if s.over {
			s.endOversized()
		} else {
			s.out = append(s.out, s.ev...)
			s.ev = s.ev[:0]
			if cap(s.ev) > 1<<20 {
				s.ev = nil
			}
			s.spare.drop() // an event within the limit ends a run of oversized ones
		}
		s.size, s.over = 0, false
	}
}

// cutting reads bytes of an oversized event: its lines' fields, the data
// to the shrinker.
func (s *sseCap) cutting(b []byte) {
	for len(b) > 0 {
		switch s.in {
		case 0: // the field name
			i := bytes.IndexAny(b, ":\n")
			if i < 0 {
				s.name = append(s.name, b[:min(len(b), 64-len(s.name))]...)
				return
			}
			s.name = append(s.name, b[:min(i, 64-len(s.name))]...)
			if b[i] == '\n' { // a line without a colon, or the event's end
				s.name = s.name[:0]
				b = b[i+1:]
				continue
			}
			b = b[i+1:]
			switch string(bytes.TrimSuffix(s.name, []byte("\r"))) {
			case "data":
				if s.data {
					s.feedData([]byte("\n"))
				}
				s.data, s.in = true, 4
			default:
				s.in = 2
				if len(s.fields)+len(s.name)+1 > 1<<10 {
					s.in = 3
				} else {
					s.fields = append(append(s.fields, s.name...), ':')
				}
			}
		case 4: // one space after "data:" is not the value's
			if b[0] == ' ' {
				b = b[1:]
			}
			s.in = 1
		default: // a value, to the line's end
			i := bytes.IndexByte(b, '\n')
			v := b
			if i >= 0 {
				v = b[:i]
			}
			switch s.in {
			case 1:
				s.feedData(bytes.TrimSuffix(v, []byte("\r")))
			case 2:
				if len(s.fields)+len(v) > 1<<10 {
					s.in = 3 // too long to keep: a field server ids and names never need
				} else {
					s.fields = append(s.fields, v...)
				}
			}
			if i < 0 {
				return
			}
			if s.in == 2 {
				s.fields = append(s.fields, '\n')
			}
			s.in, s.name, b = 0, s.name[:0], b[i+1:]
		}
	}
}

// feedData gives the shrinker a piece of the event's data and keeps its
// ends for the answer.
func (s *sseCap) feedData(b []byte) {
	if len(s.head) < capKeep {
		s.head = append(s.head, b[:min(len(b), capKeep-len(s.head))]...)
	}
	s.tail = append(s.tail, b[max(0, len(b)-capKeep):]...)
	if len(s.tail) > 2*capKeep {
		s.tail = append(s.tail[:0], s.tail[len(s.tail)-capKeep:]...)
	}
	if s.shr != nil && s.shr.write(b) != nil {
		s.shr = nil
	}
}

// endOversized writes the cut event, or the answer in its place, and
// forgets the event.
func (s *sseCap) endOversized() {
	var msg []byte
	if s.shr != nil {
		m, id, t, err := s.shr.finish()
		if err == nil && s.calls.cutInTransit(id, t) {
			if s.cut != nil {
				s.cut(s.size, len(m))
			}
			msg = m
		}
	}
	if msg == nil {
		id, ok := responseID(s.head, s.tail)
		if ok {
			b, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: codeTooLarge,
				Message: fmt.Sprintf("mcpledger: the response was over %d bytes, the limit (MaxMessageBytes); it was discarded", s.max)}})
			if err == nil {
				msg = b
			}
		}
	}
	if msg != nil {
		s.out = append(append(append(append(s.out, s.fields...), "data: "...), msg...), "\n\n"...)
	}
	s.fields, s.data, s.shr, s.head, s.tail, s.in, s.name = s.fields[:0], false, nil, s.head[:0], s.tail[:0], 0, s.name[:0]
}
