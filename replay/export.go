package replay

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"strconv"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
)

// A sealed export is one session as JSON lines: each event as
// `mcpledger log --json` prints it, with a "digest" field added as its
// last key, then a trailer line with the session, the number of events
// and the head of the chain of digests:
//
//	{"id":"…","seq":1,"gpos":40,"session":"…",…,"payload":{…},"digest":"sha256:…"}
//	…
//	{"export":"mcpledger-export/1","session":"…","events":12,"head":"sha256:…"}
//
// The digest of event n is SHA-256(digest of n-1 ‖ line n), where line n
// is the event's line without its digest and with gpos 0, and the digest
// of event 0 is SHA-256("mcpledger-export/1"). So every byte of every line
// is covered (the envelope, the whole payload: results' text and digests,
// definition hashes, arguments) except gpos, the event's position in the
// journal it was exported from, which import does not keep: the same
// session exported from two journals has the same digests. The chain is
// over the line's bytes as written, not over a re-encoding of the decoded
// event, so a later build that upcasts an old payload still checks it.
//
// The chain is not keyed: it catches any edit made by someone who does not
// recompute it, the mistakes and tampering of everyone who is not
// deliberately forging an export. A signed export (export_sign.go) also
// stops those who do, as long as the importer asks for the signer.

// ExportFormat names the sealed export format in its trailer; it is also
// the seed of the chain.
const ExportFormat = "mcpledger-export/1"

var (
	gposKey    = []byte(`,"gpos":`)
	digestKey  = []byte(`,"digest":"sha256:`)
	trailerKey = []byte(`{"export":`)
)

// Trailer is the last line of a sealed export.
type Trailer struct {
	// Format is [ExportFormat].
	Format string `json:"export"`
	// Session is the exported session.
	Session uuid.UUID `json:"session"`
	// Events is the number of event lines before the trailer.
	Events int `json:"events"`
	// Head is the digest of the last event ("sha256:" and 64 hex digits).
	Head string `json:"head"`
	// Signer and Sig are the signer's ed25519 public key and its
	// signature over Format, Session, Events and Head, in standard
	// base64; empty for an unsigned export.
	Signer string `json:"signer,omitempty"`
	Sig    string `json:"sig,omitempty"`
}

// sealer computes the chain of digests.
type sealer struct {
	head [sha256.Size]byte
	sum  hash.Hash
}

func newSealer() *sealer {
	return &sealer{head: sha256.Sum256([]byte(ExportFormat)), sum: sha256.New()}
}

// next chains line (an event's line without its digest, gpos 0) and
// returns the new head.
func (s *sealer) next(line []byte) [sha256.Size]byte {
	s.sum.Reset()
	s.sum.Write(s.head[:])
	s.sum.Write(line)
	s.sum.Sum(s.head[:0])
	return s.head
}

// digestString formats a digest as the export writes it.
func digestString(d [sha256.Size]byte) string { return "sha256:" + hex.EncodeToString(d[:]) }

// gposDigits returns where the digits of line's gpos field start and
// end; ok is false when line does not have the field where an event's
// line has it, before its session. A payload's strings cannot hold
// `,"gpos":` (their quotes are escaped), and the envelope comes first.
func gposDigits(line []byte) (start, end int, ok bool) {
	before, after, found := bytes.Cut(line, gposKey)
	start = len(before) + len(gposKey)
	end = start + len(after) - len(bytes.TrimLeft(after, "0123456789"))
	return start, end, found && end != start
}

// withGPos returns line with its gpos replaced by gpos, in dst.
func withGPos(dst, line []byte, gpos uint64) ([]byte, bool) {
	start, end, ok := gposDigits(line)
	if !ok {
		return dst, false
	}
	dst = append(dst, line[:start]...)
	dst = strconv.AppendUint(dst, gpos, 10)
	return append(dst, line[end:]...), true
}

// WriteExportOptions says how [WriteExport] seals.
type WriteExportOptions struct {
	// Sign, if set, signs the trailer with this key.
	Sign ed25519.PrivateKey
}

// WriteExport writes evs, one session in seq order, as a sealed export
// and returns its trailer.
func WriteExport(w io.Writer, evs []events.Event, opts WriteExportOptions) (Trailer, error) {
	bw := bufio.NewWriter(w)
	s := newSealer()
	t := Trailer{Format: ExportFormat, Events: len(evs), Head: digestString(s.head)}
	var canon, line []byte
	for i := range evs {
		e := evs[i]
		t.Session = e.Session
		gpos := e.GPos
		e.GPos = 0
		var err error
		if canon, err = e.AppendJSON(canon[:0]); err != nil {
			return t, fmt.Errorf("export seq %d: %w", e.Seq, err)
		}
		d := s.next(canon)
		line, _ = withGPos(line[:0], canon, gpos) // AppendJSON always writes gpos
		line = hex.AppendEncode(append(line[:len(line)-1], digestKey...), d[:])
		line = append(line, '"', '}', '\n')
		if _, err := bw.Write(line); err != nil {
			return t, fmt.Errorf("export seq %d: %w", e.Seq, err)
		}
	}
	t.Head = digestString(s.head)
	if opts.Sign != nil {
		t.sign(opts.Sign)
	}
	b, _ := json.Marshal(t) // strings and numbers: cannot fail
	bw.Write(append(b, '\n'))
	if err := bw.Flush(); err != nil {
		return t, fmt.Errorf("export trailer: %w", err)
	}
	return t, nil
}

// ReadExportOptions says what [ReadExport] accepts.
type ReadExportOptions struct {
	// Unsealed accepts an export without digests (written by a build
	// before exports were sealed, or by `log --json`): its events are
	// read, but an edit to them cannot be detected. Without it, such an
	// export is an error wrapping [ErrUnsealed]. A sealed export is
	// always checked.
	Unsealed bool
	// Signer, if set, is the fingerprint ([Fingerprint]) of the key that
	// must have signed the export; an export not signed by it is an error
	// wrapping [ErrSigner].
	Signer string
}

// Export is an export file, read and checked.
type Export struct {
	// Events are the session's events, in seq order.
	Events []events.Event
	// Lines holds the line number of each event in the file.
	Lines []int
	// Trailer is the seal; nil for an unsealed export.
	Trailer *Trailer
}

// Line returns the line number of the event at seq, or 0 if the export
// has none.
func (x *Export) Line(seq uint64) int {
	if seq == 0 || seq > uint64(len(x.Lines)) {
		return 0
	}
	return x.Lines[seq-1]
}

// rawLine is one non-blank line of an export file.
type rawLine struct {
	n    int
	text []byte
}

// ReadExport reads an export of one session and checks it: every event
// line must decode, the events must be one session with seqs from 1
// without gaps, and, for a sealed export, every line's digest must be the
// chain's and the trailer must end the file with the chain's head and the
// number of events. The first line that fails is reported as a
// *[ExportError] (wrapping [ErrTampered] or [ErrTruncated]), with its seq
// and kind when it decodes. An export without digests is an error
// wrapping [ErrUnsealed] unless opts.Unsealed.
func ReadExport(r io.Reader, opts ReadExportOptions) (*Export, error) {
	lines, blank, err := readLines(r)
	if err != nil {
		return nil, err
	}
	sealed := false
	for _, l := range lines {
		if _, _, ok := splitDigest(l.text); ok || bytes.HasPrefix(l.text, trailerKey) {
			sealed = true
			break
		}
	}
	if !sealed && !opts.Unsealed {
		return nil, ErrUnsealed
	}
	if sealed && blank > 0 {
		return nil, &ExportError{Line: blank, Reason: "is blank: lines were added after export", Err: ErrTampered}
	}
	read := readSealed
	if !sealed {
		read = readUnsealed
	}
	x, err := read(lines)
	if err == nil && opts.Signer != "" {
		err = x.checkSigner(opts.Signer)
	}
	if err != nil {
		return nil, err
	}
	return x, nil
}

// readLines reads the non-blank lines of r, and the number of the first
// blank one (0 if none).
func readLines(r io.Reader) ([]rawLine, int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	var out []rawLine
	blank := 0
	for n := 1; sc.Scan(); n++ {
		if len(sc.Bytes()) == 0 {
			if blank == 0 {
				blank = n
			}
			continue
		}
		out = append(out, rawLine{n: n, text: bytes.Clone(sc.Bytes())})
	}
	if err := sc.Err(); err != nil {
		return nil, 0, fmt.Errorf("read export: %w", err)
	}
	return out, blank, nil
}

// splitDigest splits a sealed event line into the line without its
// digest and the digest; ok is false when line does not end in one.
func splitDigest(line []byte) (body []byte, digest string, ok bool) {
	const hexLen = 2 * sha256.Size
	n := len(line) - hexLen - len(`"}`)
	if n < len(digestKey) || !bytes.HasSuffix(line, []byte(`"}`)) || !bytes.Equal(line[n-len(digestKey):n], digestKey) {
		return nil, "", false
	}
	body = append(bytes.Clone(line[:n-len(digestKey)]), '}')
	return body, "sha256:" + string(line[n:n+hexLen]), true
}

// decodeLine decodes one event line.
func decodeLine(l rawLine) (events.Event, error) {
	var e events.Event
	if err := json.Unmarshal(l.text, &e); err != nil {
		return e, fmt.Errorf("line %d: %w", l.n, err)
	}
	return e, nil
}

// checkSeq checks that e, read from line l, is the next event of the
// session of x's events; a failure wraps err.
func checkSeq(x *Export, e *events.Event, l rawLine, err error) error {
	i := len(x.Events)
	if len(x.Events) > 0 && e.Session != x.Events[0].Session {
		return &ExportError{Line: l.n, Seq: e.Seq, Kind: e.Kind, Err: err,
			Reason: fmt.Sprintf("belongs to session %s, the lines before it to %s: lines of another session were added", e.Session, x.Events[0].Session)}
	}
	if e.Seq != uint64(i+1) {
		return &ExportError{Line: l.n, Seq: e.Seq, Kind: e.Kind, Err: err,
			Reason: fmt.Sprintf("is where seq %d belongs: an event was removed, added or moved", i+1)}
	}
	return nil
}

func readUnsealed(lines []rawLine) (*Export, error) {
	x := &Export{}
	for _, l := range lines {
		e, err := decodeLine(l)
		if err != nil {
			return nil, err
		}
		if err := checkSeq(x, &e, l, ErrInvalidExport); err != nil {
			return nil, err
		}
		x.Events, x.Lines = append(x.Events, e), append(x.Lines, l.n)
	}
	return x, nil
}

func readSealed(lines []rawLine) (*Export, error) {
	x := &Export{}
	s := newSealer()
	var canon []byte
	for _, l := range lines {
		if x.Trailer != nil {
			return nil, &ExportError{Line: l.n, Reason: "follows the trailer: lines were added after the export's end", Err: ErrTampered}
		}
		if bytes.HasPrefix(l.text, trailerKey) {
			t, err := checkTrailer(x, s, l)
			if err != nil {
				return nil, err
			}
			x.Trailer = t
			continue
		}
		body, digest, ok := splitDigest(l.text)
		if !ok {
			body = l.text
		}
		e, decErr := decodeLine(rawLine{n: l.n, text: body})
		kind, seq := e.Kind, e.Seq // zero when the line does not decode
		if !ok {
			return nil, &ExportError{Line: l.n, Seq: seq, Kind: kind, Reason: "has no digest: it was added, or its digest removed, after export", Err: ErrTampered}
		}
		if decErr == nil {
			if err := checkSeq(x, &e, l, ErrTampered); err != nil {
				return nil, err
			}
		}
		var zeroed bool
		canon, zeroed = withGPos(canon[:0], body, 0)
		if !zeroed || digestString(s.next(canon)) != digest {
			return nil, &ExportError{Line: l.n, Seq: seq, Kind: kind, Reason: "differs from what was exported (its digest does not match)", Err: ErrTampered}
		}
		if decErr != nil {
			return nil, decErr // as exported, but this build cannot read it
		}
		x.Events, x.Lines = append(x.Events, e), append(x.Lines, l.n)
	}
	if x.Trailer == nil { // lines holds one at least: it is sealed
		return nil, &ExportError{Line: lines[len(lines)-1].n, Reason: fmt.Sprintf("is the last, and no trailer follows: the end of the export was cut off (%d events read)", len(x.Events)), Err: ErrTruncated}
	}
	return x, nil
}

// checkTrailer checks the trailer line l against the events before it.
func checkTrailer(x *Export, s *sealer, l rawLine) (*Trailer, error) {
	var t Trailer
	dec := json.NewDecoder(bytes.NewReader(l.text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return nil, &ExportError{Line: l.n, Reason: fmt.Sprintf("is not a trailer: %v", err), Err: ErrTampered}
	}
	if b, _ := json.Marshal(t); !bytes.Equal(b, l.text) || t.Format != ExportFormat {
		return nil, &ExportError{Line: l.n, Reason: "is not the trailer that was exported (" + ExportFormat + ")", Err: ErrTampered}
	}
	if t.Events != len(x.Events) {
		return nil, &ExportError{Line: l.n, Reason: fmt.Sprintf("is the trailer of %d events, and %d precede it: events were removed from the end", t.Events, len(x.Events)), Err: ErrTampered}
	}
	if len(x.Events) == 0 || t.Session != x.Events[0].Session {
		return nil, &ExportError{Line: l.n, Reason: fmt.Sprintf("is the trailer of session %s, not of the events before it", t.Session), Err: ErrTampered}
	}
	if t.Head != digestString(s.head) {
		return nil, &ExportError{Line: l.n, Reason: "holds a head that is not the last event's digest: the trailer was edited", Err: ErrTampered}
	}
	if _, ok := t.signer(); !ok {
		return nil, &ExportError{Line: l.n, Reason: "holds a signature that does not verify: the trailer was edited, or signed with another key than the one it names", Err: ErrTampered}
	}
	return &t, nil
}

// canonical is an event as its export line shows it, with gpos 0: two
// events with the same canonical bytes show the same thing. An exported
// event always marshals (it was read from JSON); a stored one that does
// not is left cut short, and so differs from it.
func canonical(dst []byte, e events.Event) []byte {
	e.GPos = 0
	dst, _ = e.AppendJSON(dst)
	return dst
}

// Conflict compares the export with stored, the events the journal holds
// for the same session: nil when they are the same events (positions in
// the journal aside), else a *[ConflictError] naming the first event that
// differs. Both sides are compared as decoded, at the current schema
// versions.
func (x *Export) Conflict(stored []events.Event) error {
	var a, b []byte
	for i := 0; i < max(len(x.Events), len(stored)); i++ {
		seq := uint64(i + 1)
		if i >= len(x.Events) {
			return &ConflictError{Seq: seq, Stored: &stored[i]}
		}
		if i >= len(stored) {
			return &ConflictError{Seq: seq, Line: x.Lines[i], Exported: &x.Events[i]}
		}
		if a, b = canonical(a[:0], x.Events[i]), canonical(b[:0], stored[i]); !bytes.Equal(a, b) {
			return &ConflictError{Seq: seq, Line: x.Lines[i], Field: differs(&x.Events[i], &stored[i]),
				Exported: &x.Events[i], Stored: &stored[i]}
		}
	}
	return nil
}

// differs names the first field of the envelope that differs between a
// and b, in the order an export line has them, or "payload".
func differs(a, b *events.Event) string {
	for _, f := range [...]struct {
		name   string
		differ bool
	}{
		{"id", a.ID != b.ID}, {"time", a.Time != b.Time}, {"kind", a.Kind != b.Kind}, {"v", a.V != b.V},
		{"server", a.Server != b.Server}, {"cause", a.Cause != b.Cause},
	} {
		if f.differ {
			return f.name
		}
	}
	return "payload"
}
