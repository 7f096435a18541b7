package store

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/mcpledger/mcpledger/events"
)

// The read protocol: how a [Reader] reads through the process that holds
// the journal. A request is one JSON [readRequest]; the answer is a stream
// of frames, each a type byte and a body:
//
//	'R' record:  uvarint gpos, 16-byte session, uvarint seq, uvarint length, the stored record
//	'E' end:     uvarint next position: everything stored up to now was sent
//	'V' value:   uvarint length, JSON (sessions, a head, checkpoints, a verify report, info)
//	'X' error:   uvarint length, JSON [wireError]
//
// Records travel as stored, so the reader checks their CRCs and decodes
// them with the same code as a read of the file: an answer through the
// writer is the answer the file gives. The transport (the control socket)
// is the caller's; [ServeRead] is the writer's side.

// Read protocol ops.
const (
	opInfo        = "info"
	opSessions    = "sessions"
	opHead        = "head"
	opLog         = "log"     // records of the global log from From to the end, then 'E'
	opSession     = "session" // records of Session from seq From to its end, then 'E'
	opFollow      = "follow"  // records of the log from From, an 'E' after each burst, until the writer stops
	opCheckpoints = "checkpoints"
	opVerify      = "verify"
	opLocate      = "locate" // the session and seq of the record at global position From
	opCursor      = "cursor" // the cursor named Name
)

// readRequest is one read asked of the writer.
type readRequest struct {
	Op      string    `json:"op"`
	Session uuid.UUID `json:"session,omitzero"`
	From    uint64    `json:"from,omitempty"`
	Name    string    `json:"name,omitempty"`
}

// readerInfo answers opInfo.
type readerInfo struct {
	Base   uint64 `json:"base"`
	Sealed string `json:"sealed,omitempty"`
}

// wireCheckpoint is a [Checkpoint] on the wire.
type wireCheckpoint struct {
	GPos uint64     `json:"gpos"`
	Data []byte     `json:"data,omitempty"`
	Err  *wireError `json:"err,omitempty"`
	Base bool       `json:"base,omitempty"`
}

// wireLocation answers opLocate.
type wireLocation struct {
	Session uuid.UUID `json:"session"`
	Seq     uint64    `json:"seq"`
}

// wireVerify answers opVerify: the report, and the error if any.
type wireVerify struct {
	Report VerifyReport `json:"report"`
	Err    *wireError   `json:"err,omitempty"`
}

// followCoalesce is the least time between two bursts a follow answer
// sends, so that the commits of a busy writer go out together.
const followCoalesce = 10 * time.Millisecond

// ServeRead answers one read request from a [Reader] (see
// [ReaderOptions.Remote]) on j, writing the answer to w. It returns when
// the answer is complete, w fails, or ctx ends; for a follow request, only
// the last two. Reads run in short read transactions, as any read of j.
func ServeRead(ctx context.Context, j *Journal, request []byte, w io.Writer) error {
	var req readRequest
	if err := json.Unmarshal(request, &req); err != nil {
		return fmt.Errorf("store: read request: %w", err)
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	err := serveRead(ctx, j, req, &frameWriter{w: bw})
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	return err
}

func serveRead(ctx context.Context, j *Journal, req readRequest, fw *frameWriter) error {
	switch req.Op {
	case opInfo:
		return fw.value(readerInfo{Base: j.Base(), Sealed: j.Sealed()})
	case opSessions:
		list, err := j.Sessions(ctx)
		return fw.result(list, err)
	case opHead:
		info, err := j.Head(ctx, req.Session)
		return fw.result(info, err)
	case opCheckpoints:
		cps, err := j.Checkpoints(ctx)
		out := make([]wireCheckpoint, len(cps))
		for i, cp := range cps {
			out[i] = wireCheckpoint{GPos: cp.GPos, Data: cp.Data, Err: toWire(cp.Err), Base: cp.Base}
		}
		return fw.result(out, err)
	case opCursor:
		c, err := j.Cursor(ctx, req.Name)
		return fw.result(c, err)
	case opVerify:
		rep, err := j.Verify(ctx)
		return fw.value(wireVerify{Report: rep, Err: toWire(err)})
	case opLocate:
		var loc wireLocation
		_ = j.read(func(tx *bolt.Tx) error { // a damaged index may fault too
			loc.Session, loc.Seq, _ = locate(tx, req.From)
			return nil
		})
		return fw.value(loc)
	case opLog, opFollow:
		next := max(req.From, j.base+1)
		var sent time.Time
		for {
			wake := j.committed() // before reading, so that no commit is missed
			var done bool
			var err error
			if next, done, err = j.sendRecords(ctx, fw, j.fillLog, next); done || err != nil {
				return err
			}
			if err := fw.end(next); err != nil {
				return err
			}
			if req.Op == opLog {
				return nil
			}
			if err := fw.w.Flush(); err != nil {
				return err
			}
			sent = time.Now()
			if err := j.awaitCommit(ctx, wake); err != nil {
				return err
			}
			// At most one burst per followCoalesce: a commit after a
			// quiet moment goes out at once, those of a busy writer
			// gather, so that with many followers each costs the writer a
			// read and a write per followCoalesce at most, not per commit.
			if err := sleepCtx(ctx, time.Until(sent.Add(followCoalesce))); err != nil {
				return err
			}
		}
	case opSession:
		next, done, err := j.sendRecords(ctx, fw, j.fillSession(req.Session), max(req.From, 1))
		if done || err != nil {
			return err
		}
		return fw.end(next)
	}
	return fw.fail(fmt.Errorf("store: unknown read op %q (the process holding the journal runs another version of mcpledger: restart it with this one)", req.Op))
}

// sendRecords sends the records from next on, chunk by chunk, until a
// short chunk (the end) or an error. A read error is sent as the answer's
// last frame (done: the answer is complete); err is the transport's or
// ctx's.
func (j *Journal) sendRecords(ctx context.Context, fw *frameWriter, fill fillFunc, next uint64) (_ uint64, done bool, err error) {
	c := getChunk()
	defer putChunk(c)
	for {
		c.reset()
		after, ferr := fill(ctx, c, next)
		for i, rec := range c.recs {
			if err := fw.record(c.pos[i], rec); err != nil {
				return next, false, err
			}
		}
		if ferr != nil {
			if ctx.Err() != nil {
				return next, false, ctx.Err()
			}
			return next, true, fw.fail(j.attribute(ferr))
		}
		next = after
		if len(c.recs) < readChunk {
			return next, false, nil
		}
	}
}

// frameWriter writes the read protocol's frames.
type frameWriter struct {
	w   *bufio.Writer
	buf [1 + 3*binary.MaxVarintLen64 + 16]byte
}

func (fw *frameWriter) record(p recPos, rec []byte) error {
	b := append(fw.buf[:0], 'R')
	b = binary.AppendUvarint(b, p.gpos)
	b = append(b, p.sid[:]...)
	b = binary.AppendUvarint(b, p.seq)
	b = binary.AppendUvarint(b, uint64(len(rec)))
	if _, err := fw.w.Write(b); err != nil {
		return err
	}
	_, err := fw.w.Write(rec)
	return err
}

func (fw *frameWriter) end(next uint64) error {
	_, err := fw.w.Write(binary.AppendUvarint(append(fw.buf[:0], 'E'), next))
	return err
}

func (fw *frameWriter) blob(kind byte, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := fw.w.Write(binary.AppendUvarint(append(fw.buf[:0], kind), uint64(len(data)))); err != nil {
		return err
	}
	_, err = fw.w.Write(data)
	return err
}

func (fw *frameWriter) value(v any) error { return fw.blob('V', v) }

func (fw *frameWriter) fail(err error) error { return fw.blob('X', toWire(err)) }

func (fw *frameWriter) result(v any, err error) error {
	if err != nil {
		return fw.fail(err)
	}
	return fw.value(v)
}

// wireError is an error on the wire: its message, the sentinels it wraps,
// and its *CorruptError if it has one, so that the reader's error reads
// and matches (errors.Is, errors.As) as the writer's did.
type wireError struct {
	Msg       string      `json:"msg"`
	Sentinels []string    `json:"is,omitempty"`
	Corrupt   *wireCorupt `json:"corrupt,omitempty"`
}

type wireCorupt struct {
	Session uuid.UUID `json:"session,omitzero"`
	Seq     uint64    `json:"seq,omitempty"`
	GPos    uint64    `json:"gpos,omitempty"`
	Reason  string    `json:"reason"`
	Err     string    `json:"err,omitempty"`
}

// wireSentinels are the errors a reader can match on, by name.
var wireSentinels = map[string]error{
	"not_found":          ErrNotFound,
	"closed":             ErrClosed,
	"corrupt":            ErrCorrupt,
	"checkpoint_damaged": ErrCheckpointDamaged,
	"cursor_damaged":     ErrCursorDamaged,
	"not_journal":        ErrNotJournal,
	"newer_format":       ErrNewerFormat,
	"sealed":             ErrSealed,
	"events_corrupt":     events.ErrCorrupt,
}

func toWire(err error) *wireError {
	if err == nil {
		return nil
	}
	we := &wireError{Msg: err.Error()}
	for name, s := range wireSentinels {
		if errors.Is(err, s) {
			we.Sentinels = append(we.Sentinels, name)
		}
	}
	var ce *CorruptError
	if errors.As(err, &ce) {
		we.Corrupt = &wireCorupt{Session: ce.Session, Seq: ce.Seq, GPos: ce.GPos, Reason: ce.Reason}
		if ce.Err != nil {
			we.Corrupt.Err = ce.Err.Error()
		}
	}
	return we
}

// remoteError is an error read from the wire.
type remoteError struct {
	msg  string
	errs []error
}

func (e *remoteError) Error() string   { return e.msg }
func (e *remoteError) Unwrap() []error { return e.errs }

func (we *wireError) err() error {
	if we == nil {
		return nil
	}
	re := &remoteError{msg: we.Msg}
	if c := we.Corrupt; c != nil {
		ce := &CorruptError{Session: c.Session, Seq: c.Seq, GPos: c.GPos, Reason: c.Reason}
		if c.Err != "" {
			ce.Err = &remoteError{msg: c.Err}
			if errorsHas(we.Sentinels, "events_corrupt") {
				ce.Err.(*remoteError).errs = []error{events.ErrCorrupt}
			}
		}
		re.errs = append(re.errs, ce)
	}
	for _, name := range we.Sentinels {
		if s, ok := wireSentinels[name]; ok {
			re.errs = append(re.errs, s)
		}
	}
	return re
}

func errorsHas(list []string, name string) bool {
	for _, s := range list {
		if s == name {
			return true
		}
	}
	return false
}

// frameReader reads the read protocol's frames.
type frameReader struct {
	r *bufio.Reader
	// The frame read last: kind, and for 'R' its position and record (valid
	// until the next frame), for 'E' next, for 'V' and 'X' body.
	kind byte
	pos  recPos
	rec  []byte
	next uint64
	body []byte
}

// maxFrame bounds a frame's body: a record or value larger than this is
// a broken stream, not something to allocate.
const maxFrame = 1 << 30

func (fr *frameReader) read() error {
	kind, err := fr.r.ReadByte()
	if err != nil {
		return err
	}
	fr.kind = kind
	switch kind {
	case 'R':
		if fr.pos.gpos, err = binary.ReadUvarint(fr.r); err != nil {
			return unexpected(err)
		}
		if _, err = io.ReadFull(fr.r, fr.pos.sid[:]); err != nil {
			return unexpected(err)
		}
		if fr.pos.seq, err = binary.ReadUvarint(fr.r); err != nil {
			return unexpected(err)
		}
		fr.rec, err = fr.readBody(fr.rec)
		return err
	case 'E':
		fr.next, err = binary.ReadUvarint(fr.r)
		return unexpected(err)
	case 'V', 'X':
		fr.body, err = fr.readBody(fr.body)
		return err
	case '{': // a JSON answer: a process that does not know the read protocol
		line, _ := fr.r.ReadString('\n')
		var resp struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal([]byte("{"+line), &resp)
		return fmt.Errorf("%w (it answered: %s)", ErrNoReads, resp.Error)
	}
	return fmt.Errorf("store: read protocol: unknown frame %q", kind)
}

// ErrNoReads is the error of a read through a writer that does not serve
// them (an older mcpledger).
var ErrNoReads = errors.New("store: the process holding the journal does not serve reads (an older mcpledger?): stop it and run the command again")

func (fr *frameReader) readBody(dst []byte) ([]byte, error) {
	n, err := binary.ReadUvarint(fr.r)
	if err != nil {
		return dst, unexpected(err)
	}
	if n > maxFrame {
		return dst, fmt.Errorf("store: read protocol: frame of %d bytes", n)
	}
	if uint64(cap(dst)) < n {
		dst = make([]byte, n)
	}
	dst = dst[:n]
	_, err = io.ReadFull(fr.r, dst)
	return dst, unexpected(err)
}

// unexpected turns an EOF inside a frame into io.ErrUnexpectedEOF.
func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// decodeAnswer reads a one-value answer ('V' or 'X') into v.
func (fr *frameReader) decodeAnswer(v any) error {
	if err := fr.read(); err != nil {
		return err
	}
	switch fr.kind {
	case 'V':
		return json.Unmarshal(fr.body, v)
	case 'X':
		var we wireError
		if err := json.Unmarshal(fr.body, &we); err != nil {
			return err
		}
		return &answerError{(&we).err()}
	}
	return fmt.Errorf("store: read protocol: unexpected frame %q", fr.kind)
}

// answerError is an error the writer answered with (as opposed to one of
// the transport): the read is over, and its error is Err.
type answerError struct{ Err error }

func (e *answerError) Error() string { return e.Err.Error() }
func (e *answerError) Unwrap() error { return e.Err }
