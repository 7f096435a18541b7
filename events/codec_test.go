package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/google/uuid"
	"github.com/vmihailenco/msgpack/v5"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

func bp(b bool) *bool { return &b }

// sample returns one populated event of every kind, each payload with
// nested structs, slices and pointers set, so encoding covers them.
func sample() []Event {
	cfg := ServerConfig{Name: "gh", Source: "/w/.mcp.json", Scope: ScopeProject, Transport: TransportStdio,
		Command: "npx", Args: []string{"-y", "gh-mcp"}, Env: RedactKVs([]KV{{"Z", "1"}, {"GITHUB_TOKEN", "ghp_secret"}}),
		Headers: RedactKVs([]KV{{"Authorization", "Bearer x"}}), TimeoutMs: 5000, IncludeTools: []string{"read*"},
		Gated: true, Approval: ApprovalFact{Decision: DecisionApprove, Hash: "sha256:ab", By: "alice", At: 7, Changed: []string{"args"}, ToolHashes: []KV{{"t", "h"}}},
		RecentLaunches: []int64{1, 2, 3}, RecentCrashes: []int64{2, 3},
		OAuth: &OAuthConfig{ClientID: "app", ClientSecret: HashValue("s"), CallbackPort: 8080, Scopes: []string{"repo"},
			AuthServerMetadataURL: "https://a.example.com/m", ClientMetadataURL: "https://c.example.com/c.json"}}
	cfg.Hash = ConfigHash(&cfg)
	tool := Tool{Name: "search", Description: "Search issues", InputSchema: `{"type":"object"}`,
		Annotations: ToolAnnotations{ReadOnly: bp(true), Idempotent: bp(false)}, DefHash: ToolDefHash("search", "Search issues", `{"type":"object"}`)}
	ce := ClassifiedError{Class: ErrExit, Message: "exit status 3", ExitCode: 3}
	blob := Blob{Text: `{"q":"x"}`, Size: 9, SHA256: "00ff"}
	ps := []Payload{
		&SessionStarted{Seed: 42, Build: "dev", Version: "0.1.0", PID: 9, Host: "h", Command: "run", Options: DeciderOptions{BackoffBaseMs: 1000, MaxAttempts: 5}, Previous: "x"},
		&StopRequested{Reason: ReasonShutdown, By: "signal"},
		&ConfigObserved{Trigger: "start", Workspace: "/w", Trusted: true, LaunchBound: []string{"gh"}, HasLaunchBound: true,
			Allowed: []string{}, HasAllowed: true, Excluded: []string{"x"}, Servers: []ServerConfig{cfg}, Errors: []string{"a.json:1:2: bad"}},
		&ApprovalDecided{Workspace: "/w", Decision: DecisionApprove, Hash: cfg.Hash, By: "alice", Scope: ScopeProject, ToolHashes: []KV{{"search", tool.DefHash}}, Config: &cfg},
		&ReconnectRequested{FailedOnly: true, By: "cli"},
		&ProcessSpawned{Attempt: 1, PID: 100, PGID: 100, Command: "npx"},
		&TransportOpened{Attempt: 1, Transport: TransportHTTP, Endpoint: "127.0.0.1:1"},
		&ConnectFailed{Attempt: 1, Phase: "handshake", Error: ce},
		&HandshakeCompleted{Attempt: 1, ProtocolVersion: "2025-11-25", ServerName: "gh", Capabilities: Capabilities{Tools: true, ToolsListChanged: true}},
		&ToolsListed{Attempt: 1, Trigger: "initial", Tools: []Tool{tool}, ProtocolVersion: "2026-07-28", Excluded: []ExcludedTool{{Name: "bad", Reason: "x-mcp-header must be a non-empty string"}}},
		&ResourcesListed{Attempt: 1, Resources: []Resource{{URI: "file:///a", Name: "a"}}, Templates: []ResourceTemplate{{URITemplate: "file:///{p}"}}, Error: "x"},
		&PromptsListed{Attempt: 1, Prompts: []Prompt{{Name: "p", Arguments: []PromptArgument{{Name: "a", Required: true}}}}},
		&PingFailed{Attempt: 1, Consecutive: 2, Error: "timeout", Class: ErrAuth},
		&ProcessExited{Attempt: 1, PID: 100, ExitCode: -1, Signal: "killed", StderrTail: []string{"a", "b"}, Expected: true},
		&TransportClosed{Attempt: 1, Error: ClassifiedError{Class: ErrTransportClosed, Message: "EOF"}},
		&TimerFired{TimerID: 3, Purpose: TimerBackoff, Attempt: 2},
		&OutputSkipped{Attempt: 1, Line: "Starting server on stdio...", Skipped: 1},
		&CallStarted{CallID: "c1", Tool: "search", Name: "mcp__gh__search", Args: blob, Caller: "cli", Policy: "ask", ApprovedBy: "user:cli", DefHash: "sha256:ab", Attempt: 1, RetryOf: "c0"},
		&CallFinished{CallID: "c1", Outcome: OutcomeOK, Result: blob, DurationNs: 1000, Signals: []string{"phrase:ignore_instructions"}, RenderedChars: 9, CutChars: 1, Retrying: true},
		&CallDecided{CallID: "c0", Tool: "search", Name: "mcp__gh__search", Decision: CallAllow, By: "user:cli", Policy: "ask", DefHash: "sha256:ab",
			TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", TraceState: "congo=t61rcWkgMzE"},
		&GatewayRejected{Remote: "127.0.0.1:5000", Reason: RejectWrongToken, Status: 401, Method: "POST", Host: "127.0.0.1:8080", Origin: "http://localhost", Suppressed: 2},
		&SessionStopped{Reason: ReasonShutdown},
		&ReloadDecided{Trigger: "watch", Verdicts: []ReloadVerdict{{Server: "gh", Verdict: VerdictRestart, Before: "a", After: "b"}}},
		&AdmissionDecided{Admitted: false, Reason: ReasonPendingApproval, Hash: cfg.Hash, Detail: "never approved"},
		&ServerTransitioned{From: StateReady, To: StateReconnecting, Trigger: "fail", Attempt: 2, Error: &ce},
		&TimerScheduled{TimerID: 3, Purpose: TimerBackoff, Attempt: 2, Retry: 1, DelayMs: 10, CeilMs: 1000, FireAt: 99},
		&ApprovalRequested{Workspace: "/w", Hash: cfg.Hash, Scope: ScopeProject, Previous: "p", Changed: []string{"args"}},
		&ToolsPinned{Workspace: "/w", Hash: cfg.Hash, Tools: []KV{{"search", tool.DefHash}}},
		&ToolsChanged{Changed: []ToolChange{{Name: "search", Pinned: "a", Listed: "b"}, {Name: "new", Listed: "c"}}},
		&JournalArchived{File: "journal-archive-000000000000099.db", Through: 99, From: 1, Digest: "ab12", Cutoff: 1_690_000_000_000_000_000,
			Sessions: []ArchivedSession{{Session: "0190f5a2-7d3c-7a10-8000-000000000000", Events: 99, Head: "cd34"}}},
		&JournalResumed{Since: 1_700_000_000_000_000_000, Until: 1_700_000_001_000_000_000, Error: "write journal.db: no space left on device",
			Attempts: 7, Backlog: 3, Coalesced: 4, Dropped: 1, LostRelaxed: 2},
		&AuthSignedIn{Issuer: "https://auth.example.com", Resource: "https://mcp.example.com/mcp", Scopes: []string{"read", "write"},
			ClientKind: ClientMetadataDocument, ExpiresAt: 1_700_000_360_000_000_000, StepUp: true},
		&AuthRefreshed{Issuer: "https://auth.example.com", Scopes: []string{"read"}, ExpiresAt: 1_700_000_720_000_000_000},
		&AuthFailed{Phase: AuthPhaseExchange, Issuer: "https://auth.example.com", Error: "invalid_grant: the code expired"},
		&AuthSignedOut{Issuer: "https://auth.example.com", Revoked: false, RevokeError: "revocation endpoint answered 503"},
	}
	sid := uuid.MustParse("0190f5a2-7d3c-7a10-8000-000000000001")
	out := make([]Event, len(ps))
	for i, p := range ps {
		out[i] = Event{ID: uuid.MustParse("0190f5a2-7d3c-7a10-8000-0000000000aa"), Session: sid, Seq: uint64(i + 1),
			GPos: uint64(100 + i), Time: 1_700_000_000_000_000_000 + int64(i), Kind: p.Kind(), V: p.Kind().Version(),
			Server: "gh", Cause: uint64(i), Payload: p}
	}
	return out
}

func TestEveryKindHasSample(t *testing.T) {
	seen := map[Kind]bool{}
	for _, e := range sample() {
		seen[e.Kind] = true
	}
	for _, k := range Kinds() {
		if !seen[k] {
			t.Errorf("no sample for %s", k)
		}
		if !k.Valid() || k.Version() == 0 {
			t.Errorf("%s: not valid or version 0", k)
		}
	}
	if Kind("nope").Valid() || Kind("nope").IsInput() || Kind("nope").Version() != 0 {
		t.Error("unknown kind accepted")
	}
	inputs := 0
	for _, k := range Kinds() {
		if k.IsInput() {
			inputs++
		}
	}
	if inputs != 27 || len(Kinds())-inputs != 8 {
		t.Errorf("inputs=%d decisions=%d", inputs, len(Kinds())-inputs)
	}
}

func TestRoundTrip(t *testing.T) {
	enc, dec := NewEncoder(), NewDecoder()
	for _, e := range sample() {
		rec, err := enc.Append(nil, &e)
		if err != nil {
			t.Fatalf("%s: %v", e.Kind, err)
		}
		got, err := dec.Decode(rec)
		if err != nil {
			t.Fatalf("%s: %v", e.Kind, err)
		}
		if !reflect.DeepEqual(got, e) {
			t.Errorf("%s: round trip differs\n got %+v\nwant %+v", e.Kind, got.Payload, e.Payload)
		}
		again, _ := enc.Append(nil, &got)
		if !bytes.Equal(again, rec) {
			t.Errorf("%s: Encode(Decode(b)) != b", e.Kind)
		}
	}
}

// TestByteStable encodes every sample 1,000 times and requires identical
// bytes each time: no map order or pointer address reaches the encoding.
func TestByteStable(t *testing.T) {
	for _, e := range sample() {
		first, err := Encode(&e)
		if err != nil {
			t.Fatal(err)
		}
		enc := NewEncoder()
		for i := 0; i < 1000; i++ {
			b, err := enc.Append(nil, &e)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b, first) {
				t.Fatalf("%s: encoding %d differs", e.Kind, i)
			}
		}
	}
}

// TestNoUnknownFields decodes every sample's payload with unknown fields
// disallowed, catching a tag typo between encode and decode.
func TestNoUnknownFields(t *testing.T) {
	for _, e := range sample() {
		b, err := msgpack.Marshal(e.Payload)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := NewPayload(e.Kind)
		d := msgpack.NewDecoder(bytes.NewReader(b))
		d.DisallowUnknownFields(true)
		if err := d.Decode(p); err != nil {
			t.Errorf("%s: %v", e.Kind, err)
		}
	}
}

func TestCorruptionDetected(t *testing.T) {
	e := sample()[2]
	rec, _ := Encode(&e)
	for i := range rec {
		bad := bytes.Clone(rec)
		bad[i] ^= 0x40
		if _, err := Decode(bad); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flip at byte %d: err %v, want ErrCorrupt", i, err)
		}
	}
	if _, err := Decode(rec[:len(rec)-1]); !errors.Is(err, ErrCorrupt) {
		t.Errorf("truncated: %v", err)
	}
	if _, err := Decode(nil); !errors.Is(err, ErrCorrupt) {
		t.Errorf("empty: %v", err)
	}
}

func TestEncodeRejects(t *testing.T) {
	e := Event{Kind: KindPingFailed, Payload: &TimerFired{}}
	if _, err := Encode(&e); !errors.Is(err, ErrUnknownKind) {
		t.Errorf("mismatched payload: %v", err)
	}
	e = Event{Kind: "bogus"}
	if _, err := Encode(&e); !errors.Is(err, ErrUnknownKind) {
		t.Errorf("nil payload: %v", err)
	}
}

// rawRecord builds a record with any kind and version, as an old or a
// future build would have written it.
func rawRecord(t *testing.T, k Kind, v uint16, payload any) []byte {
	t.Helper()
	var buf bytes.Buffer
	buf.Write([]byte{0, 0, 0, 0})
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true)
	enc.UseCompactInts(true)
	id := uuid.MustParse("0190f5a2-7d3c-7a10-8000-0000000000bb")
	h := header{ID: id[:], Session: id[:], Seq: 1, GPos: 1, Time: 5, Kind: string(k), V: v, Server: "s"}
	if err := enc.Encode(&h); err != nil {
		t.Fatal(err)
	}
	if err := enc.Encode(payload); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	b[0], b[1], b[2], b[3] = 0, 0, 0, 0
	crc := crcOf(b[4:])
	b[0], b[1], b[2], b[3] = byte(crc>>24), byte(crc>>16), byte(crc>>8), byte(crc)
	return b
}

func TestUnknownAndFutureVersions(t *testing.T) {
	if _, err := Decode(rawRecord(t, "alien.kind", 1, &PingFailed{})); !errors.Is(err, ErrUnknownKind) {
		t.Errorf("unknown kind: %v", err)
	}
	if _, err := Decode(rawRecord(t, KindPingFailed, 9, &PingFailed{})); !errors.Is(err, ErrUnknownKind) {
		t.Errorf("future version: %v", err)
	}
}

// Upcaster fixtures: one stored record per historical (kind, version), and
// the current struct it must upcast to. The fixture bytes are written once
// (with -update) and then never change: they stand for journals in the
// field.
var upcastFixtures = []struct {
	file    string
	kind    Kind
	version uint16
	old     any
	want    Payload
}{
	{"process.exited.v1-exit.msgpack", KindProcessExited, 1,
		&ProcessExitedV1{Attempt: 2, PID: 41, Status: "exit status 3", StderrTail: "line one\nfatal: no token\n"},
		&ProcessExited{Attempt: 2, PID: 41, ExitCode: 3, StderrTail: []string{"line one", "fatal: no token"}}},
	{"process.exited.v1-signal.msgpack", KindProcessExited, 1,
		&ProcessExitedV1{Attempt: 1, PID: 7, Status: "signal: killed", Expected: true},
		&ProcessExited{Attempt: 1, PID: 7, ExitCode: -1, Signal: "killed", Expected: true}},
}

func TestUpcastFixtures(t *testing.T) {
	for _, f := range upcastFixtures {
		path := filepath.Join("testdata", "upcast", f.file)
		if *update {
			if _, err := os.Stat(path); err != nil {
				if err := os.WriteFile(path, rawRecord(t, f.kind, f.version, f.old), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		rec, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v (run go test ./events -update once to create it)", f.file, err)
		}
		e, err := Decode(rec)
		if err != nil {
			t.Fatalf("%s: %v", f.file, err)
		}
		if e.V != f.kind.Version() || !reflect.DeepEqual(e.Payload, f.want) {
			t.Errorf("%s: got v%d %+v, want %+v", f.file, e.V, e.Payload, f.want)
		}
		// The JSON path upcasts the same way (export files of old sessions).
		j, _ := json.Marshal(map[string]any{"id": e.ID.String(), "session": e.Session.String(), "seq": 1,
			"time": "2026-01-01T00:00:00Z", "kind": f.kind, "v": f.version, "payload": f.old})
		var je Event
		if err := json.Unmarshal(j, &je); err != nil {
			t.Fatalf("%s json: %v", f.file, err)
		}
		if !reflect.DeepEqual(je.Payload, f.want) {
			t.Errorf("%s json: got %+v", f.file, je.Payload)
		}
	}
	// Every historical version below the current one must have a fixture.
	for _, k := range Kinds() {
		for v := uint16(1); v < k.Version(); v++ {
			found := false
			for _, f := range upcastFixtures {
				found = found || f.kind == k && f.version == v
			}
			if !found {
				t.Errorf("%s v%d has no upcaster fixture", k, v)
			}
		}
	}
}

func TestJSONRoundTrip(t *testing.T) {
	for _, e := range sample() {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		var got Event
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%s: %v\n%s", e.Kind, err, b)
		}
		if !reflect.DeepEqual(got, e) {
			t.Errorf("%s: JSON round trip differs\n%s", e.Kind, b)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, e := range sample() {
		rec, _ := Encode(&e)
		f.Add(rec)
	}
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		d := NewDecoder()
		e, err := d.Decode(b)
		if err != nil {
			return
		}
		// Whatever decodes must re-encode, and decode again to the same.
		rec, err := Encode(&e)
		if err != nil {
			t.Fatalf("decoded %s does not re-encode: %v", e.Kind, err)
		}
		if _, err := d.Decode(rec); err != nil {
			t.Fatalf("re-encoded %s does not decode: %v", e.Kind, err)
		}
		// Decoding the payload bytes alone, with the CRC fixed, never panics.
		if len(b) > 4 {
			fixed := append([]byte{0, 0, 0, 0}, b[4:]...)
			c := crcOf(fixed[4:])
			fixed[0], fixed[1], fixed[2], fixed[3] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
			_, _ = d.Decode(fixed)
		}
	})
}
