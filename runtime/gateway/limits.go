package gateway

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// The HTTP endpoint's budget. A request costs nothing while it waits for
// its body: it takes its share when the first byte of its body arrives
// (its Content-Length, or the body limit when it has none) and one of the
// requests in flight, and gives both back when it has been answered (a
// POST is answered when its last response is, so a tool call holds its
// share for as long as it runs). A request the budget cannot take is
// answered 503 with Retry-After and journaled (gateway.rejected, reason
// busy). A body that does not arrive within the body timeout is cut (408,
// reason slow_body). GET streams take no share: they are bounded by the
// session cap (see sessionTable). Nor do 2026-07-28 subscriptions/listen
// streams once their body is read: they are bounded by a cap of their own
// (listenCap, at the session cap).
//
// What a request's share bounds: go-sdk reads the body whole, tries it as
// a batch, decodes it into its message, then into the tool's arguments
// (each decode through a decoder that first copies the value into a
// buffer of its own), the call path marshals, checks and redacts the
// arguments, go-sdk's client encodes them again for the server, and the
// result comes back through as many decodes and encodes. A 4 MB tools/call
// allocates some 15 copies of itself, about ten live at once (40 MB), and
// costs about a CPU-second of JSON work (RELIABILITY.md, "gateway
// bounds"). The budget bounds the bodies in that state at once: the
// default (8 MiB, of which large bodies may take 7.5) lets one 4 MB body
// through at a time. Results are bounded by MaxInflight and the servers'
// frame limit (16 MiB over stdio), not by the byte budget.

// Defaults of the HTTP bounds (HTTPOptions).
const (
	DefaultMaxInflightBytes = 8 << 20
	DefaultMaxInflight      = 32
	DefaultMaxBodyBytes     = 4 << 20
	DefaultBodyTimeout      = 30 * time.Second
	DefaultMaxSessions      = 1000
	DefaultSessionIdle      = 30 * time.Minute
)

// retryAfter is the Retry-After (seconds) of a 503 for lack of budget.
const retryAfter = 1

// budget counts the body bytes and requests in flight.
type budget struct {
	maxBytes int64
	maxReqs  int
	// idle, if set, runs once no request has been in flight for
	// idleQuiet (see HTTPOptions.OnIdle).
	idle func()

	mu    sync.Mutex
	bytes int64
	reqs  int
	timer *time.Timer // arms idle
}

// idleQuiet is how long no request must be in flight before
// HTTPOptions.OnIdle runs.
const idleQuiet = time.Second

// smallBody is the size up to which a body may use the reserve: a
// sixteenth of the byte budget that large bodies leave alone, so that
// ordinary requests (initialize, a small tool call) still pass while large
// ones fill the rest.
const smallBody = 64 << 10

// take reserves n bytes and a request, or nothing if either would exceed
// the budget.
func (b *budget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	limit := b.maxBytes
	if n > smallBody {
		limit -= b.maxBytes / 16
	}
	if b.reqs >= b.maxReqs || b.bytes+n > limit {
		return false
	}
	b.bytes += n
	b.reqs++
	if b.timer != nil {
		b.timer.Stop()
	}
	return true
}

// give returns what take reserved.
func (b *budget) give(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bytes -= n
	b.reqs--
	if b.reqs > 0 || b.idle == nil {
		return
	}
	if b.timer == nil {
		b.timer = time.AfterFunc(idleQuiet, b.fire)
	} else {
		b.timer.Reset(idleQuiet)
	}
}

// fire runs idle unless a request came in the meantime.
func (b *budget) fire() {
	b.mu.Lock()
	idle, quiet := b.idle, b.reqs == 0
	b.mu.Unlock()
	if quiet && idle != nil {
		idle()
	}
}

// stop disarms idle for good.
func (b *budget) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.idle = nil
	if b.timer != nil {
		b.timer.Stop()
	}
}

var (
	errBusy     = errors.New("gateway: busy")
	errSlowBody = errors.New("gateway: body too slow")
)

// meteredBody is a request body that takes the request's share of the
// budget when its first byte arrives, and ends reading at the body
// timeout. go-sdk reads it whole before it decodes anything; an error here
// makes go-sdk answer 400, which refusal (see refusingWriter) turns into
// the answer that says why.
type meteredBody struct {
	io.ReadCloser
	b        *budget
	share    int64
	rc       *http.ResponseController
	taken    bool
	refusal  error // errBusy or errSlowBody, once refused
	finished bool
	// stream: the request is a long-lived stream (a 2026-07-28
	// subscriptions/listen), which gives back its share once its body is
	// read whole, as a GET stream takes none (listenCap bounds them).
	stream bool
}

// newMeteredBody arms the body timeout on r's connection and meters r's
// body. share is what the request costs once its body starts.
func newMeteredBody(w http.ResponseWriter, r *http.Request, b *budget, share int64, timeout time.Duration) *meteredBody {
	mb := &meteredBody{ReadCloser: r.Body, b: b, share: share, rc: http.NewResponseController(w)}
	_ = mb.rc.SetReadDeadline(time.Now().Add(timeout))
	return mb
}

func (mb *meteredBody) Read(p []byte) (int, error) {
	if mb.refusal != nil {
		return 0, mb.refusal
	}
	n, err := mb.ReadCloser.Read(p)
	if !mb.taken && (n > 0 || err == io.EOF) {
		if !mb.b.take(mb.share) {
			mb.refusal = errBusy
			return 0, errBusy
		}
		mb.taken = true
	}
	if errors.Is(err, io.EOF) && !mb.finished {
		// Read whole: the connection's deadline would otherwise end the
		// response stream too (net/http cancels a request whose
		// connection read fails).
		mb.finished = true
		_ = mb.rc.SetReadDeadline(time.Time{})
		if mb.stream {
			mb.release()
		}
	}
	var ne interface{ Timeout() bool }
	if err != nil && errors.As(err, &ne) && ne.Timeout() {
		mb.refusal = errSlowBody
		return n, errSlowBody
	}
	return n, err
}

// drain reads and discards what is left of a refused body, at most limit
// bytes, within the body timeout still armed on the connection: a client
// still writing its body when the refusal is answered would otherwise
// see its connection closed under it ("broken pipe") instead of the 503
// and its Retry-After. It costs a pooled copy buffer, never the body.
func (mb *meteredBody) drain(limit int64) {
	_, _ = io.Copy(io.Discard, io.LimitReader(mb.ReadCloser, limit))
}

// release gives back the request's share, if it took one.
func (mb *meteredBody) release() {
	if mb.taken {
		mb.taken = false
		mb.b.give(mb.share)
	}
}

// refusingWriter answers, instead of go-sdk's 400, why the body was not
// read (body.refusal), and captures the session ID of a response.
type refusingWriter struct {
	http.ResponseWriter
	body    *meteredBody // nil for requests without a metered body
	refuse  func(err error)
	refused bool
	wrote   bool
	// onHeader, if set, runs once the response's header is final and
	// before it is written (not for a refused request).
	onHeader func()
}

func (w *refusingWriter) WriteHeader(code int) {
	if w.wrote {
		return
	}
	w.wrote = true
	if w.body != nil && w.body.refusal != nil && code == http.StatusBadRequest {
		w.refused = true
		w.refuse(w.body.refusal)
		return
	}
	if w.onHeader != nil {
		w.onHeader()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *refusingWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.refused {
		return len(p), nil // go-sdk's own message, replaced
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController (go-sdk flushes with one) reach the
// connection.
func (w *refusingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// setRetryAfter sets the Retry-After of a 503.
func setRetryAfter(h http.Header) { h.Set("Retry-After", strconv.Itoa(retryAfter)) }
