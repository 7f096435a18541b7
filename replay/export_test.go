package replay_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/replay"
)

// sealed returns the golden approvals session (35 events: a call at seq
// 24-25, pinned definition hashes at 23) as a sealed export, one string a
// line (36: the trailer last), and its events.
func sealed(t *testing.T) ([]string, []events.Event) {
	t.Helper()
	evs := golden(t, "approvals.jsonl")
	var buf bytes.Buffer
	if _, err := replay.WriteExport(&buf, evs, replay.WriteExportOptions{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != len(evs)+1 {
		t.Fatalf("%d lines for %d events", len(lines), len(evs))
	}
	return lines, evs
}

func readExport(lines []string, opts replay.ReadExportOptions) (*replay.Export, error) {
	return replay.ReadExport(strings.NewReader(strings.Join(lines, "\n")+"\n"), opts)
}

// An export reads back as the events written, each line the event as
// `log --json` prints it plus its digest, the trailer counting them.
func TestExportRoundTrip(t *testing.T) {
	evs := golden(t, "approvals.jsonl")
	for i := range evs { // a result bigger than bufio.Scanner's default 64 KiB line
		if p, ok := evs[i].Payload.(*events.CallFinished); ok {
			big := *p
			big.Result.Text = `"` + strings.Repeat("x", 100<<10) + `"`
			evs[i].Payload = &big
		}
	}
	var buf bytes.Buffer
	tr, err := replay.WriteExport(&buf, evs, replay.WriteExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	digest := regexp.MustCompile(`,"digest":"sha256:[0-9a-f]{64}"}$`)
	for i, e := range evs {
		want, _ := e.AppendJSON(nil)
		if got := digest.ReplaceAllString(lines[i], "}"); got != string(want) {
			t.Fatalf("line %d is not the event as log --json prints it plus a digest:\n%s\n%s", i+1, lines[i], want)
		}
	}
	wantTrailer := fmt.Sprintf(`{"export":"mcpledger-export/1","session":"%s","events":%d,"head":"%s"}`, evs[0].Session, len(evs), tr.Head)
	if lines[len(lines)-1] != wantTrailer || !strings.HasSuffix(lines[len(evs)-1], `"digest":"`+tr.Head+`"}`) {
		t.Fatalf("trailer %s, want %s with the last line's digest", lines[len(lines)-1], wantTrailer)
	}
	x, err := replay.ReadExport(&buf, replay.ReadExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(x.Events, evs) {
		t.Errorf("read back %d events that differ from the %d written", len(x.Events), len(evs))
	}
	if *x.Trailer != tr {
		t.Errorf("trailer %+v, want %+v", *x.Trailer, tr)
	}
	for seq, want := range map[uint64]int{0: 0, 1: 1, 35: 35, 36: 0} {
		if got := x.Line(seq); got != want {
			t.Errorf("Line(%d) = %d, want %d", seq, got, want)
		}
	}
}

// The seal does not depend on the positions the events had in the journal
// they came from: the same session exported from two journals has the
// same digests, and its lines differ in gpos only.
func TestExportSealIgnoresGPos(t *testing.T) {
	a := golden(t, "approvals.jsonl")
	b := golden(t, "approvals.jsonl")
	for i := range b {
		b[i].GPos += 1000
	}
	var ba, bb bytes.Buffer
	ta, _ := replay.WriteExport(&ba, a, replay.WriteExportOptions{})
	tb, _ := replay.WriteExport(&bb, b, replay.WriteExportOptions{})
	if ta != tb {
		t.Fatalf("trailers differ: %+v, %+v", ta, tb)
	}
	gpos := regexp.MustCompile(`"gpos":\d+`)
	if gpos.ReplaceAllString(ba.String(), "") != gpos.ReplaceAllString(bb.String(), "") {
		t.Error("the exports differ in more than gpos")
	}
	if ba.String() == bb.String() {
		t.Error("the exports do not show the source journal's positions")
	}
	// gpos is not sealed: import gives new positions.
	lines := strings.Split(strings.TrimSuffix(bb.String(), "\n"), "\n")
	lines[4] = strings.Replace(lines[4], `"gpos":1005`, `"gpos":7`, 1)
	x, err := readExport(lines, replay.ReadExportOptions{})
	if err != nil || x.Events[4].GPos != 7 {
		t.Errorf("an export with another gpos: %v", err)
	}
}

// Every edit of a sealed export is refused, naming the first line that
// differs from what was exported, its seq and kind.
func TestExportDetectsEdits(t *testing.T) {
	orig, evs := sealed(t)
	sid := evs[0].Session.String()
	other := events.NewID().String()
	type edit struct {
		name   string
		change func(l []string) []string
		// line, seq and kind of the error; its reason; ErrTampered unless
		// truncated.
		line      int
		seq       uint64
		kind      events.Kind
		reason    string
		truncated bool
	}
	replace := func(i int, old, new string) func([]string) []string {
		return func(l []string) []string {
			if !strings.Contains(l[i], old) {
				panic(fmt.Sprintf("line %d has no %q", i+1, old))
			}
			l[i] = strings.Replace(l[i], old, new, 1)
			return l
		}
	}
	differs := "differs from what was exported (its digest does not match)"
	for _, c := range []edit{
		{name: "result text", change: replace(24, `\"text\":\"approved\"`, `\"text\":\"denied\"`),
			line: 25, seq: 25, kind: events.KindCallFinished, reason: differs},
		{name: "result digest", change: replace(24, `"sha256":"4385`, `"sha256":"0385`),
			line: 25, seq: 25, kind: events.KindCallFinished, reason: differs},
		{name: "definition hash", change: replace(22, `"sha256:b60f047f`, `"sha256:000f047f`),
			line: 23, seq: 23, kind: events.KindToolsPinned, reason: differs},
		{name: "time", change: replace(9, `"time":"2026-`, `"time":"1999-`),
			line: 10, seq: 10, kind: evs[9].Kind, reason: differs},
		{name: "cause", change: replace(22, `"cause":21`, `"cause":20`),
			line: 23, seq: 23, kind: events.KindToolsPinned, reason: differs},
		{name: "whitespace", change: replace(2, `,"kind":`, `, "kind":`),
			line: 3, seq: 3, kind: evs[2].Kind, reason: differs},
		{name: "a key added", change: replace(2, `,"kind":`, `,"note":"ok","kind":`),
			line: 3, seq: 3, kind: evs[2].Kind, reason: differs},
		{name: "digest", change: func(l []string) []string { l[6] = l[6][:len(l[6])-4] + `00"}`; return l },
			line: 7, seq: 7, kind: evs[6].Kind, reason: differs},
		{name: "gpos digits removed", change: replace(6, `"gpos":7,`, `"gpos":,`),
			line: 7, reason: differs},
		{name: "a digest alone", change: func([]string) []string { return []string{`,"digest":"sha256:` + strings.Repeat("0", 64) + `"}`} },
			line: 1, reason: differs},
		{name: "gpos key", change: replace(6, `,"gpos":`, `,"gPos":`),
			line: 7, seq: 7, kind: evs[6].Kind, reason: differs},
		{name: "digest removed", change: func(l []string) []string {
			l[6] = regexp.MustCompile(`,"digest":"[^"]*"`).ReplaceAllString(l[6], "")
			return l
		},
			line: 7, seq: 7, kind: evs[6].Kind, reason: "has no digest: it was added, or its digest removed, after export"},
		{name: "undecodable", change: replace(6, `"kind":"`, `"kind":`),
			line: 7, reason: differs},
		{name: "line deleted", change: func(l []string) []string { return append(l[:4:4], l[5:]...) },
			line: 5, seq: 6, kind: evs[5].Kind, reason: "is where seq 5 belongs: an event was removed, added or moved"},
		{name: "lines swapped", change: func(l []string) []string { l[4], l[5] = l[5], l[4]; return l },
			line: 5, seq: 6, kind: evs[5].Kind, reason: "is where seq 5 belongs: an event was removed, added or moved"},
		{name: "line repeated", change: func(l []string) []string { return append(l[:5:5], l[4:]...) },
			line: 6, seq: 5, kind: evs[4].Kind, reason: "is where seq 6 belongs: an event was removed, added or moved"},
		{name: "session", change: replace(3, `"session":"`+sid, `"session":"`+other),
			line: 4, seq: 4, kind: evs[3].Kind, reason: "belongs to session " + other + ", the lines before it to " + sid + ": lines of another session were added"},
		{name: "blank line", change: func(l []string) []string { return append(l[:3:3], append([]string{""}, l[3:]...)...) },
			line: 4, reason: "is blank: lines were added after export"},
		{name: "trailer dropped", change: func(l []string) []string { return l[:35] },
			line: 35, reason: "is the last, and no trailer follows: the end of the export was cut off (35 events read)", truncated: true},
		{name: "trailer and last event dropped", change: func(l []string) []string { return l[:34] },
			line: 34, reason: "is the last, and no trailer follows: the end of the export was cut off (34 events read)", truncated: true},
		{name: "last event dropped", change: func(l []string) []string { return append(l[:34:34], l[35]) },
			line: 35, reason: "is the trailer of 35 events, and 34 precede it: events were removed from the end"},
		{name: "line after the trailer", change: func(l []string) []string { return append(l, l[3]) },
			line: 37, reason: "follows the trailer: lines were added after the export's end"},
		{name: "trailer head", change: replace(35, `"head":"sha256:`, `"head":"sha256:0`),
			line: 36, reason: "holds a head that is not the last event's digest: the trailer was edited"},
		{name: "trailer head digits", change: func(l []string) []string { l[35] = l[35][:len(l[35])-4] + `00"}`; return l },
			line: 36, reason: "holds a head that is not the last event's digest: the trailer was edited"},
		{name: "trailer count", change: replace(35, `"events":35`, `"events":36`),
			line: 36, reason: "is the trailer of 36 events, and 35 precede it: events were removed from the end"},
		{name: "trailer session", change: replace(35, sid, other),
			line: 36, reason: "is the trailer of session " + other + ", not of the events before it"},
		{name: "trailer format", change: replace(35, `"mcpledger-export/1"`, `"mcpledger-export/2"`),
			line: 36, reason: "is not the trailer that was exported (mcpledger-export/1)"},
		{name: "trailer field added", change: replace(35, `"events":`, `"note":"x","events":`),
			line: 36, reason: `is not a trailer: json: unknown field "note"`},
		{name: "trailer spaced", change: replace(35, `"events":`, ` "events":`),
			line: 36, reason: "is not the trailer that was exported (mcpledger-export/1)"},
		{name: "trailer only", change: func(l []string) []string { return l[35:] },
			line: 1, reason: "is the trailer of 35 events, and 0 precede it: events were removed from the end"},
	} {
		t.Run(c.name, func(t *testing.T) {
			lines := c.change(append([]string(nil), orig...))
			x, err := readExport(lines, replay.ReadExportOptions{Unsealed: true})
			var xe *replay.ExportError
			if !errors.As(err, &xe) || x != nil {
				t.Fatalf("ReadExport = %v, %v; want an *ExportError", x, err)
			}
			want := replay.ErrTampered
			if c.truncated {
				want = replay.ErrTruncated
			}
			if *xe != (replay.ExportError{Line: c.line, Seq: c.seq, Kind: c.kind, Reason: c.reason, Err: want}) {
				t.Errorf("got  %#v\nwant line %d seq %d %s %q %v", *xe, c.line, c.seq, c.kind, c.reason, want)
			}
		})
	}
}

// The chain is what the format says, recomputed here from the text: the
// digest of event n is SHA-256(digest n-1 ‖ line n without its digest and
// with gpos 0), the digest of event 0 SHA-256("mcpledger-export/1"), and
// the trailer's head is the last digest.
func TestExportChainAsDocumented(t *testing.T) {
	lines, _ := sealed(t)
	head := sha256.Sum256([]byte("mcpledger-export/1"))
	digest := regexp.MustCompile(`,"digest":"sha256:([0-9a-f]{64})"}$`)
	gpos := regexp.MustCompile(`"gpos":\d+`)
	for i, l := range lines[:len(lines)-1] {
		m := digest.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("line %d has no digest", i+1)
		}
		body := strings.TrimSuffix(l, m[0]) + "}"
		loc := gpos.FindStringIndex(body)
		body = body[:loc[0]] + `"gpos":0` + body[loc[1]:]
		head = sha256.Sum256(append(head[:], body...))
		if got := hex.EncodeToString(head[:]); got != m[1] {
			t.Fatalf("line %d: digest %s, recomputed %s", i+1, m[1], got)
		}
	}
	if !strings.HasSuffix(lines[len(lines)-1], `"head":"sha256:`+hex.EncodeToString(head[:])+`"}`) {
		t.Errorf("trailer %s, recomputed head %x", lines[len(lines)-1], head)
	}
}

// An export without digests (from a build before sealing, or log --json)
// is refused unless asked for; then its events are read, and must still
// be one session with seqs from 1 without gaps.
func TestReadExportUnsealed(t *testing.T) {
	evs := golden(t, "approvals.jsonl")
	var buf bytes.Buffer
	if err := replay.WriteJSONL(&buf, evs); err != nil {
		t.Fatal(err)
	}
	plain := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if x, err := readExport(plain, replay.ReadExportOptions{}); !errors.Is(err, replay.ErrUnsealed) || x != nil {
		t.Fatalf("an unsealed export without the option: %v, %v", x, err)
	}
	withBlank := append(append([]string{""}, plain...), "")
	x, err := readExport(withBlank, replay.ReadExportOptions{Unsealed: true})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(x.Events, evs) || x.Trailer != nil || x.Line(1) != 2 || x.Line(35) != 36 {
		t.Errorf("read %d events, trailer %v, lines %d..%d", len(x.Events), x.Trailer, x.Line(1), x.Line(35))
	}
	gap := append(append([]string(nil), plain[:3]...), plain[4:]...)
	_, err = readExport(gap, replay.ReadExportOptions{Unsealed: true})
	var xe *replay.ExportError
	if !errors.As(err, &xe) || !errors.Is(err, replay.ErrInvalidExport) || xe.Line != 4 || xe.Seq != 5 {
		t.Errorf("an unsealed export with a gap: %v", err)
	}
	bad := append(append([]string(nil), plain[:3]...), `{"seq":4,"kind":"server.transitioned","payl`)
	if _, err := readExport(bad, replay.ReadExportOptions{Unsealed: true}); err == nil || !strings.HasPrefix(err.Error(), "line 4: ") {
		t.Errorf("an unsealed export with a line that does not decode: %v", err)
	}
	// A trailer without digests: the digests were removed.
	sealedLines, _ := sealed(t)
	stripped := append(append([]string(nil), plain...), sealedLines[35])
	if _, err := readExport(stripped, replay.ReadExportOptions{Unsealed: true}); !errors.As(err, &xe) || xe.Line != 1 || !errors.Is(err, replay.ErrTampered) {
		t.Errorf("an export whose digests were removed: %v", err)
	}
	if x, err := replay.ReadExport(strings.NewReader(""), replay.ReadExportOptions{Unsealed: true}); err != nil || len(x.Events) != 0 {
		t.Errorf("an empty file: %v, %v", x, err)
	}
}

// A sealed line that is as exported, but of a kind this build does not
// know (from a newer build), is reported as unreadable, not as edited.
func TestReadExportUnknownKind(t *testing.T) {
	evs := golden(t, "approvals.jsonl")[:2]
	evs[1].Kind = "future.kind"
	var buf bytes.Buffer
	if _, err := replay.WriteExport(&buf, evs, replay.WriteExportOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := replay.ReadExport(&buf, replay.ReadExportOptions{})
	if !errors.Is(err, events.ErrUnknownKind) || !strings.HasPrefix(err.Error(), "line 2: ") || errors.Is(err, replay.ErrTampered) {
		t.Errorf("ReadExport = %v", err)
	}
}

func TestWriteExportReportsTheWriteError(t *testing.T) {
	full := errors.New("disk full")
	for _, n := range []int{0, 1, 35} { // within bufio's buffer (at the flush), and past it
		evs := golden(t, "approvals.jsonl")[:n]
		if _, err := replay.WriteExport(failingWriter{full}, evs, replay.WriteExportOptions{}); !errors.Is(err, full) {
			t.Errorf("WriteExport of %d events to a full disk = %v", n, err)
		}
	}
	evs := golden(t, "approvals.jsonl")[:1]
	evs[0].Payload = &badPayload{}
	if _, err := replay.WriteExport(&bytes.Buffer{}, evs, replay.WriteExportOptions{}); err == nil || !strings.HasPrefix(err.Error(), "export seq 1: ") {
		t.Errorf("WriteExport of a payload that does not marshal = %v", err)
	}
}

// badPayload does not marshal.
type badPayload struct{ events.ToolsChanged }

func (*badPayload) MarshalJSON() ([]byte, error) { return nil, errors.New("no") }

// Conflict finds the first event where an export and the journal's
// session differ, and which of its fields.
func TestExportConflict(t *testing.T) {
	lines, evs := sealed(t)
	x, err := readExport(lines, replay.ReadExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored := load(t, evs)
	held, err := replay.Session(t.Context(), stored, evs[0].Session)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Conflict(held); err != nil {
		t.Fatalf("the same session: %v", err)
	}
	clone := func() []events.Event { return append([]events.Event(nil), held...) }
	for _, c := range []struct {
		field  string
		change func(e *events.Event)
	}{
		{"id", func(e *events.Event) { e.ID = events.NewID() }},
		{"time", func(e *events.Event) { e.Time-- }},
		{"kind", func(e *events.Event) { e.Kind = events.KindToolsChanged }},
		{"v", func(e *events.Event) { e.V++ }},
		{"server", func(e *events.Event) { e.Server += "x" }},
		{"cause", func(e *events.Event) { e.Cause++ }},
		{"payload", func(e *events.Event) {
			p := *e.Payload.(*events.CallFinished)
			p.Result.Text = "denied"
			e.Payload = &p
		}},
	} {
		s := clone()
		c.change(&s[24])
		var ce *replay.ConflictError
		if err := x.Conflict(s); !errors.As(err, &ce) || !errors.Is(err, replay.ErrConflict) {
			t.Fatalf("%s changed: %v", c.field, err)
		}
		if ce.Seq != 25 || ce.Line != 25 || ce.Field != c.field || ce.Exported != &x.Events[24] || ce.Stored != &s[24] {
			t.Errorf("%s changed: %+v", c.field, ce)
		}
	}
	var ce *replay.ConflictError
	if err := x.Conflict(held[:30]); !errors.As(err, &ce) || ce.Seq != 31 || ce.Line != 31 || ce.Stored != nil || ce.Exported != &x.Events[30] || ce.Field != "" {
		t.Errorf("the journal holds fewer events: %v", err)
	}
	more := append(clone(), held[0])
	if err := x.Conflict(more); !errors.As(err, &ce) || ce.Seq != 36 || ce.Line != 0 || ce.Exported != nil || ce.Stored != &more[35] {
		t.Errorf("the journal holds more events: %v", err)
	}
	// GPos aside.
	s := clone()
	s[3].GPos += 100
	if err := x.Conflict(s); err != nil {
		t.Errorf("another gpos: %v", err)
	}
}

func TestConflictErrorNamesBothSides(t *testing.T) {
	evs := golden(t, "approvals.jsonl")
	a, b := evs[24], evs[24]
	p := *b.Payload.(*events.CallFinished)
	p.Result.Text = strings.Repeat("y", 1000)
	b.Payload = &p
	err := &replay.ConflictError{Seq: 25, Line: 27, Field: "payload", Exported: &a, Stored: &b}
	got := err.Error()
	pa, _ := json.Marshal(a.Payload)
	pb, _ := json.Marshal(b.Payload)
	want := "replay: the journal holds this session with different content: they first differ at seq 25 (line 27 of the export), in its payload: " +
		"the export has call.finished gh " + string(pa) + " at 2026-11-22T08:14:47.71643165Z, " +
		"the journal has call.finished gh " + string(pb[:300-len("call.finished gh ")]) + fmt.Sprintf("… (%d bytes)", len("call.finished gh ")+len(pb)) + " at 2026-11-22T08:14:47.71643165Z"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	// A description of exactly 300 bytes is not cut.
	p.Result.Text = ""
	for len(`call.finished gh `)+len(mustJSON(t, &p)) < 300 {
		p.Result.Text += "y"
	}
	if n := len(`call.finished gh `) + len(mustJSON(t, &p)); n != 300 {
		t.Fatalf("the description is %d bytes", n)
	}
	if got := (&replay.ConflictError{Seq: 25, Stored: &b}).Error(); !strings.HasSuffix(got, "the journal has call.finished gh "+string(mustJSON(t, &p))+" at 2026-11-22T08:14:47.71643165Z") {
		t.Errorf("a description of 300 bytes: %s", got)
	}
	short := (&replay.ConflictError{Seq: 36, Stored: &a}).Error()
	if want := "replay: the journal holds this session with different content: they first differ at seq 36: the export has nothing, the journal has call.finished gh " + string(pa) + " at 2026-11-22T08:14:47.71643165Z"; short != want {
		t.Errorf("got  %s\nwant %s", short, want)
	}
}

func TestExportErrorNamesTheLine(t *testing.T) {
	e := &replay.ExportError{Line: 25, Seq: 25, Kind: events.KindCallFinished, Reason: "differs", Err: replay.ErrTampered}
	if got, want := e.Error(), "replay: the export was changed after it was written: line 25 (seq 25 call.finished) differs"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	e = &replay.ExportError{Line: 36, Reason: "is the last", Err: replay.ErrTruncated}
	if got, want := e.Error(), "replay: the export is incomplete: line 36 is the last"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if !errors.Is(e, replay.ErrTruncated) || errors.Is(e, replay.ErrTampered) {
		t.Error("ExportError does not unwrap to its Err")
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Line endings are not content: an export whose lines end in CRLF (a
// Windows checkout, a mail client) reads as the one written.
func TestReadExportCRLF(t *testing.T) {
	lines, evs := sealed(t)
	x, err := replay.ReadExport(strings.NewReader(strings.Join(lines, "\r\n")+"\r\n"), replay.ReadExportOptions{})
	if err != nil || !reflect.DeepEqual(x.Events, evs) {
		t.Fatalf("ReadExport of CRLF lines: %v", err)
	}
}
