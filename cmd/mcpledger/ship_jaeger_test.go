package main

// `mcpledger ship` against a real backend: Jaeger v2 (built by
// .ci/peers.sh into $MCPLEDGER_PEERS_DIR/bin), started on loopback ports
// with in-memory storage, and read back through its query API (api/v3).

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/export/otlp"
	"github.com/mcpledger/mcpledger/store"
	"github.com/mcpledger/mcpledger/tracectx"
)

// jaeger is a Jaeger v2 process on loopback ports.
type jaeger struct {
	bin, cfg string
	env      []string
	otlp     string // OTLP/HTTP base URL
	grpc     string // OTLP/gRPC URL (http://: plain text)
	query    string // query API base URL
	cmd      *exec.Cmd
	out      *faultBuffer
}

// freePort returns a loopback port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startJaeger starts Jaeger from .ci/peers.sh's build, or skips.
func startJaeger(t *testing.T) *jaeger {
	t.Helper()
	bin := filepath.Join(peersDir(t, "bin/jaeger"), "bin", "jaeger")
	cfg, err := filepath.Abs(filepath.Join("testdata", "jaeger.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	op, og, qp, gp := freePort(t), freePort(t), freePort(t), freePort(t)
	jg := &jaeger{bin: bin, cfg: cfg,
		env: []string{fmt.Sprintf("JAEGER_OTLP_PORT=%d", op), fmt.Sprintf("JAEGER_OTLP_GRPC_PORT=%d", og),
			fmt.Sprintf("JAEGER_QUERY_PORT=%d", qp), fmt.Sprintf("JAEGER_QUERY_GRPC_PORT=%d", gp)},
		otlp:  fmt.Sprintf("http://127.0.0.1:%d", op),
		grpc:  fmt.Sprintf("http://127.0.0.1:%d", og),
		query: fmt.Sprintf("http://127.0.0.1:%d", qp)}
	jg.start(t)
	t.Cleanup(func() { jg.kill() })
	return jg
}

func (jg *jaeger) start(t *testing.T) {
	t.Helper()
	jg.out = &faultBuffer{}
	jg.cmd = exec.Command(jg.bin, "--config", jg.cfg)
	jg.cmd.Env = append(os.Environ(), jg.env...)
	jg.cmd.Stdout, jg.cmd.Stderr = jg.out, jg.out
	if err := jg.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if jg.up() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("jaeger did not come up:\n%s", jg.out.String())
		}
	}
}

// up reports whether the receivers and the query API answer (the gRPC
// receiver: accepts connections).
func (jg *jaeger) up() bool {
	for _, u := range []string{jg.query + "/api/v3/services", jg.otlp + "/v1/traces"} {
		resp, err := http.Get(u)
		if err != nil {
			return false
		}
		resp.Body.Close()
	}
	c, err := net.Dial("tcp", strings.TrimPrefix(jg.grpc, "http://"))
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// kill kills Jaeger with SIGKILL: what it held in memory is gone.
func (jg *jaeger) kill() {
	if jg.cmd != nil && jg.cmd.Process != nil {
		_ = jg.cmd.Process.Kill()
		_ = jg.cmd.Wait()
		jg.cmd = nil
	}
}

// services lists the service names Jaeger holds spans of.
func (jg *jaeger) services(t *testing.T) []string {
	t.Helper()
	resp, err := http.Get(jg.query + "/api/v3/services")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var res struct {
		Services []string `json:"services"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		t.Fatal(err)
	}
	return res.Services
}

// jspan is a span as Jaeger's api/v3 returns it.
type jspan struct {
	TraceID    string `json:"traceId"`
	SpanID     string `json:"spanId"`
	Parent     string `json:"parentSpanId"`
	Name       string `json:"name"`
	Attributes []struct {
		Key   string         `json:"key"`
		Value map[string]any `json:"value"`
	} `json:"attributes"`
}

func (s jspan) attr(k string) string {
	for _, a := range s.Attributes {
		if a.Key == k {
			for _, v := range a.Value {
				return fmt.Sprint(v)
			}
		}
	}
	return ""
}

// trace returns the spans Jaeger holds of trace id, as received (raw:
// duplicates are not merged), or nil when it holds none.
func (jg *jaeger) trace(t *testing.T, id string) []jspan {
	t.Helper()
	resp, err := http.Get(jg.query + "/api/v3/traces/" + id + "?query.raw_traces=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusNotFound {
		return nil
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("jaeger: GET trace %s: %s\n%s", id, resp.Status, body)
	}
	var res struct {
		Result struct {
			ResourceSpans []struct {
				ScopeSpans []struct {
					Spans []jspan `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		t.Fatalf("jaeger: trace %s: %v\n%s", id, err, body)
	}
	var out []jspan
	for _, rs := range res.Result.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			out = append(out, ss.Spans...)
		}
	}
	return out
}

// callSpans maps the journal at jp (read beside its writer) and returns
// the spans of its tool calls, by span ID.
func callSpans(t *testing.T, jp string) map[string]otlp.Span {
	t.Helper()
	r, err := store.OpenReader(t.Context(), jp, readerOptions(jp))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m := otlp.NewMapper()
	out := map[string]otlp.Span{}
	err = r.ReadAll(t.Context(), 1, func(e events.Event) error {
		spans, _ := m.Map(e)
		for _, s := range spans {
			if strings.HasPrefix(s.Name, "tools/call ") {
				out[s.SpanID.String()] = s
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkSpans waits until Jaeger holds every span of want, each with the
// conventions' name and attributes, and no span in their traces whose ID
// the journal does not give (a record sent twice carries the same IDs).
func checkSpans(t *testing.T, jg *jaeger, want map[string]otlp.Span) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for id, s := range want {
		var got []jspan
		for {
			got = jg.trace(t, hex.EncodeToString(s.TraceID[:]))
			if hasSpan(got, id) || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !hasSpan(got, id) {
			t.Fatalf("jaeger has no span %s (%s) of trace %s after 30 s", id, s.Name, s.TraceID)
		}
		t.Logf("jaeger holds span %s %q of trace %s (%d spans in it)", id, s.Name, s.TraceID, len(got))
		for _, g := range got {
			if !strings.EqualFold(g.SpanID, id) {
				if _, ok := want[strings.ToLower(g.SpanID)]; !ok {
					t.Errorf("trace %s holds span %s (%s), which the journal does not give", s.TraceID, g.SpanID, g.Name)
				}
				continue
			}
			if g.Name != "tools/call echo" || g.attr("mcp.method.name") != "tools/call" || g.attr("gen_ai.tool.name") != "echo" ||
				g.attr("gen_ai.operation.name") != "execute_tool" || g.attr("mcpledger.call.outcome") != "ok" ||
				g.attr("mcp.protocol.version") == "" || g.attr("gen_ai.tool.call.id") == "" {
				t.Errorf("span %s in jaeger: %+v", id, g)
			}
		}
	}
}

func hasSpan(spans []jspan, id string) bool {
	for _, s := range spans {
		if strings.EqualFold(s.SpanID, id) {
			return true
		}
	}
	return false
}

// newer returns the spans of b that a does not have.
func newer(a, b map[string]otlp.Span) map[string]otlp.Span {
	out := map[string]otlp.Span{}
	for id, s := range b {
		if _, ok := a[id]; !ok {
			out[id] = s
		}
	}
	return out
}

func echoCalls(t *testing.T, jp string, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if r := runCLI(t, "call", "mcp__good__echo", "--args", fmt.Sprintf(`{"message":"m%d"}`, i), "--journal", jp); r.err != nil {
			t.Fatalf("call through run: %v\n%s", r.err, r.stderr)
		}
	}
}

// waitLine waits until out holds s n times.
func waitLine(t *testing.T, out *faultBuffer, s string, n int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); strings.Count(out.String(), s) < n; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited for %q ×%d:\n%s", s, n, out.String())
		}
	}
}

// TestShipToJaeger: calls through `run` shipped by a `ship --follow
// --cursor` beside it appear in Jaeger as spans with the conventions'
// names and attributes; Jaeger killed and restarted: the calls made
// meanwhile appear, after one failure line and one recovery line; ship
// killed with -9 and started again: every call appears, and no trace
// holds a span the journal does not give (duplicates share IDs); after
// run stops, the journal shipped by `ship` to a fresh Jaeger gives the
// same spans.
func TestShipToJaeger(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Jaeger and mcpledger processes")
	}
	jg := startJaeger(t)
	dir := t.TempDir()
	cfg := faultConfig(t, dir, false)
	jp := filepath.Join(dir, "journal.db")
	cursor := filepath.Join(dir, "ship.cursor")
	holder := startRun(t, jp, cfg, dir)
	echoCalls(t, jp, 0, 3)

	shipEnv := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + jg.otlp, "OTEL_SERVICE_NAME=mcpledger-test"}
	// Without --cursor, ship would hold the journal: beside run it says
	// how to ship anyway.
	if code, out := runCLIProcess(t, shipEnv, "ship", "--journal", jp); code != 1 || !strings.Contains(out, "mcpledger ship --cursor FILE") {
		t.Errorf("ship beside run without --cursor: exit %d\n%s", code, out)
	}
	ship, shipOut := cliProcess(t, shipEnv, "ship", "--follow", "--cursor", cursor, "--journal", jp)
	if err := ship.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ship.Process.Kill(); _ = ship.Wait() })
	first := callSpans(t, jp)
	if len(first) != 3 {
		t.Fatalf("%d call spans in the journal, want 3", len(first))
	}
	checkSpans(t, jg, first)
	if got := jg.services(t); !slices.Contains(got, "mcpledger-test") {
		t.Errorf("jaeger's services %v: want OTEL_SERVICE_NAME's mcpledger-test", got)
	}

	// Jaeger killed: the calls made meanwhile wait in the journal.
	jg.kill()
	echoCalls(t, jp, 3, 3)
	waitLine(t, shipOut, "otlp export failing", 1)
	jg.start(t)
	second := newer(first, callSpans(t, jp))
	if len(second) != 3 {
		t.Fatalf("%d new call spans, want 3", len(second))
	}
	checkSpans(t, jg, second)
	waitLine(t, shipOut, "otlp export recovered", 1)
	if n := strings.Count(shipOut.String(), "otlp export failing"); n != 1 {
		t.Errorf("%d failure lines for one outage, want 1:\n%s", n, shipOut.String())
	}

	rewind, err := os.ReadFile(cursor) // where the next calls begin
	if err != nil {
		t.Fatal(err)
	}

	// ship killed with -9 with a backlog (Jaeger down again): started
	// again, it sends what was not acknowledged.
	jg.kill()
	echoCalls(t, jp, 6, 3)
	waitLine(t, shipOut, "otlp export failing", 2)
	_ = ship.Process.Signal(syscall.SIGKILL)
	_ = ship.Wait()
	jg.start(t)
	if code, out := runCLIProcess(t, shipEnv, "ship", "--cursor", cursor, "--journal", jp); code != 0 {
		t.Fatalf("ship after kill -9: exit %d\n%s", code, out)
	}
	all := callSpans(t, jp)
	third := newer(first, newer(second, all))
	if len(third) != 3 {
		t.Fatalf("%d new call spans, want 3", len(third))
	}
	checkSpans(t, jg, third)

	// Records sent twice (a kill between the collector's acknowledgement
	// and the cursor's save: here, the cursor put back) carry the same
	// IDs: Jaeger, which keys spans by ID, still holds each call once.
	end, err := os.ReadFile(cursor)
	if err != nil {
		t.Fatal(err)
	}
	if string(end) == string(rewind) {
		t.Fatalf("the cursor did not move over three calls: %s", end)
	}
	if err := os.WriteFile(cursor, rewind, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := runCLIProcess(t, shipEnv, "ship", "--cursor", cursor, "--journal", jp); code != 0 {
		t.Fatalf("ship from the rewound cursor: exit %d\n%s", code, out)
	}
	if again, _ := os.ReadFile(cursor); string(again) != string(end) {
		// The cursor moves only once Jaeger acknowledged: back at the
		// end, the resent records were taken.
		t.Fatalf("cursor after shipping again from %s: %s, want %s", rewind, again, end)
	}
	for id, s := range third {
		got := jg.trace(t, hex.EncodeToString(s.TraceID[:]))
		if len(got) != 1 || !strings.EqualFold(got[0].SpanID, id) {
			t.Errorf("trace %s after its span was sent twice: %+v; want span %s once", s.TraceID, got, id)
		}
	}

	// The whole journal shipped after run stopped, with its cursor in the
	// journal, to a fresh Jaeger: the same spans, IDs and all.
	stopRun(t, holder)
	jg.kill()
	jg.start(t)
	if code, out := runCLIProcess(t, shipEnv, "ship", "--journal", jp); code != 0 {
		t.Fatalf("ship of the stopped journal: exit %d\n%s", code, out)
	}
	checkSpans(t, jg, all)
	j, err := store.Open(jp, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	c, err := j.Cursor(t.Context(), shipCursor)
	var last uint64
	_ = j.ReadAll(t.Context(), 1, func(e events.Event) error { last = e.GPos; return nil })
	if err != nil || c.GPos != last {
		t.Errorf("the journal's cursor after ship: %+v, %v; want at the last event, %d", c, err, last)
	}
}

// TestShipBadInput: an invalid OTEL_* value or flag (a protocol Go's
// SDK has no exporter for) is refused at once, naming it; an unreachable
// collector, over HTTP or gRPC, gives one line, however long it stays
// down, and the cursor does not move.
func TestShipBadInput(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mcpledger processes")
	}
	dir := t.TempDir()
	jp := filepath.Join(dir, "journal.db")
	j := mustCreate(t, jp)
	appendAll(t, j, events.NewID(), events.New(time.Now(), "", &events.SessionStarted{Seed: 1}))
	j.Close()

	missing := filepath.Join(dir, "missing.db")
	code, out := runCLIProcess(t, nil, "ship", "--journal", missing)
	if _, err := os.Stat(missing); code != 1 || !strings.Contains(out, "no journal at "+missing) || err == nil {
		t.Errorf("ship of a missing journal: exit %d, file %v\n%s", code, err, out)
	}
	code, out = runCLIProcess(t, []string{"OTEL_EXPORTER_OTLP_PROTOCOL=http/json"}, "ship", "--journal", jp)
	if code != 1 || !strings.Contains(out, `OTEL_EXPORTER_OTLP_PROTOCOL="http/json"`) || !strings.Contains(out, "no OTLP/JSON exporter; give http/protobuf") {
		t.Errorf("ship with OTEL_EXPORTER_OTLP_PROTOCOL=http/json: exit %d\n%s", code, out)
	}
	code, out = runCLIProcess(t, []string{"OTEL_EXPORTER_OTLP_PROTOCOL=grpc"}, "ship", "--otlp-protocol", "grpcs", "--journal", jp)
	if code != 1 || !strings.Contains(out, `--otlp-protocol="grpcs" is not an OTLP protocol: give grpc`) {
		t.Errorf("ship --otlp-protocol grpcs: exit %d\n%s", code, out)
	}
	code, out = runCLIProcess(t, nil, "ship", "--otlp-endpoint", "localhost:4318", "--journal", jp)
	if code != 1 || !strings.Contains(out, "--otlp-endpoint") || !strings.Contains(out, "http://localhost:4318") {
		t.Errorf("ship --otlp-endpoint localhost:4318: exit %d\n%s", code, out)
	}

	for _, protocol := range []string{"http/protobuf", "grpc"} {
		ship, shipOut := cliProcess(t, nil, "ship", "--follow", "--otlp-protocol", protocol,
			"--otlp-endpoint", fmt.Sprintf("http://127.0.0.1:%d", freePort(t)), "--journal", jp)
		if err := ship.Start(); err != nil {
			t.Fatal(err)
		}
		waitLine(t, shipOut, "otlp export failing", 1)
		time.Sleep(time.Second) // several more tries
		_ = ship.Process.Signal(os.Interrupt)
		err := ship.Wait()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		if n := strings.Count(shipOut.String(), "\n"); n != 1 || !strings.Contains(shipOut.String(), "connection refused") {
			t.Errorf("%s: want one line naming the refused connection, got:\n%s", protocol, shipOut.String())
		}
	}
	j, err := store.Open(jp, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if _, err := j.Cursor(t.Context(), shipCursor); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("cursor saved with nothing delivered: %v", err)
	}
}

// TestLiveExportToJaeger: `run` with OTEL_EXPORTER_OTLP_ENDPOINT set
// ships its calls as they are journaled (one made with --traceparent in
// an agent's trace, as a child of the agent's span); once stopped, the journal's
// cursor stands at its last event (the session's end was shipped), and
// the same journal shipped by `ship` to a fresh Jaeger gives the same
// spans, IDs and all.
func TestLiveExportToJaeger(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Jaeger and mcpledger processes")
	}
	jg := startJaeger(t)
	dir := t.TempDir()
	cfg := faultConfig(t, dir, false)
	jp := filepath.Join(dir, "journal.db")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", jg.otlp) // run's child process inherits it
	holder := startRun(t, jp, cfg, dir)
	echoCalls(t, jp, 0, 4)
	live := callSpans(t, jp)
	if len(live) != 4 {
		t.Fatalf("%d call spans in the journal, want 4", len(live))
	}
	checkSpans(t, jg, live)
	if got := jg.services(t); !slices.Equal(got, []string{"mcpledger"}) {
		t.Errorf("jaeger's services %v: want mcpledger alone (the default)", got)
	}

	// A call made in an agent's trace (`mcpledger call --traceparent`,
	// through run's control socket) joins it.
	agent := agentSpan(t, jg, func(traceparent string) {
		if r := runCLI(t, "call", "mcp__good__echo", "--args", `{"message":"traced"}`, "--journal", jp, "--traceparent", traceparent); r.err != nil {
			t.Fatalf("call --traceparent through run: %v\n%s", r.err, r.stderr)
		}
	})
	traced := newer(live, callSpans(t, jp))
	if len(traced) != 1 {
		t.Fatalf("%d new call spans, want 1", len(traced))
	}
	for id, s := range traced {
		checkJoined(t, jg, agent, id)
		live[id] = s
	}

	// Jaeger down: status shows the backlog, which is sent when it is
	// back.
	jg.kill()
	echoCalls(t, jp, 4, 1)
	if lag := statusLag(t, jp); lag == nil || lag.Events < 2 {
		t.Errorf("status with Jaeger down: export %+v; want the call's events behind", lag)
	}
	if r := runCLI(t, "status", "--journal", jp); !strings.Contains(r.stdout, "events behind") {
		t.Errorf("status with Jaeger down says:\n%s", r.stdout)
	}
	jg.start(t)
	all := callSpans(t, jp)
	checkSpans(t, jg, newer(live, all))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if lag := statusLag(t, jp); lag != nil && lag.Events == 0 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("status after Jaeger came back: export %+v, want up to date", lag)
		}
	}
	live = all
	stopRun(t, holder)
	if lag := statusLag(t, jp); lag == nil || lag.Events != 0 {
		t.Errorf("status after run stopped: export %+v; want up to date (run ships its session's end)", lag)
	}
	checkCursorAtEnd(t, jp)

	jg.kill()
	jg.start(t)
	// A fresh cursor file: the whole journal again.
	if code, out := runCLIProcess(t, nil, "ship", "--cursor", filepath.Join(dir, "again.cursor"), "--journal", jp); code != 0 {
		t.Fatalf("ship: exit %d\n%s", code, out)
	}
	checkSpans(t, jg, live)
}

// statusLag is the export lag `status --json` reports.
func statusLag(t *testing.T, jp string) *exportLag {
	t.Helper()
	r := runCLI(t, "status", "--json", "--journal", jp)
	if r.err != nil {
		t.Fatalf("status: %v\n%s", r.err, r.stderr)
	}
	var res struct {
		Export *exportLag `json:"export"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r.stdout)
	}
	return res.Export
}

// TestServeExportToJaeger: calls through `serve --otlp-endpoint` from an
// MCP client appear in Jaeger as spans with the conventions' names and
// attributes, and the client's identity; a call the client makes in a
// span of its own (traceparent in _meta) appears in the client's trace,
// as a child of its span. Over OTLP/HTTP and over gRPC (--otlp-protocol
// grpc to Jaeger's gRPC receiver).
func TestServeExportToJaeger(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Jaeger")
	}
	for _, protocol := range []string{"http/protobuf", "grpc"} {
		t.Run(protocol, func(t *testing.T) { serveExportToJaeger(t, protocol) })
	}
}

func serveExportToJaeger(t *testing.T, protocol string) {
	jg := startJaeger(t)
	endpoint := jg.otlp
	if protocol == "grpc" {
		endpoint = jg.grpc
	}
	dir := t.TempDir()
	cfg := faultConfig(t, dir, false)
	jp := filepath.Join(dir, "journal.db")
	cs, stop := serveExporting(t, "--mcp-config", cfg, "--workspace", dir, "--journal", jp,
		"--otlp-endpoint", endpoint, "--otlp-protocol", protocol)
	for i := range 3 {
		if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "mcp__good__echo", Arguments: map[string]any{"message": fmt.Sprint(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	// The agent traces too: its span, exported to the same Jaeger, and a
	// call made in it (traceparent in the request's _meta).
	agent := agentSpan(t, jg, func(traceparent string) {
		p := &mcp.CallToolParams{Name: "mcp__good__echo", Arguments: map[string]any{"message": "traced"},
			Meta: mcp.Meta{"traceparent": traceparent}}
		if _, err := cs.CallTool(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	})
	cs.Close()
	spans := callSpans(t, jp)
	if len(spans) != 4 {
		t.Fatalf("%d call spans in the journal, want 4", len(spans))
	}
	for id, s := range spans {
		if s.TraceID == agent.TraceID() {
			delete(spans, id)
			checkJoined(t, jg, agent, id)
		}
	}
	checkSpans(t, jg, spans)
	for _, s := range spans {
		got := jg.trace(t, hex.EncodeToString(s.TraceID[:]))
		if len(got) != 1 || !strings.Contains(got[0].attr("mcpledger.call.caller"), "otel-client") {
			t.Errorf("span %s in jaeger: caller %q, want the client's name", s.SpanID, got[0].attr("mcpledger.call.caller"))
		}
	}
	stop()
}

// serveExporting runs `serve --http 127.0.0.1:0` with args in this
// process and connects an MCP client ("otel-client") to it; stop closes
// the client's session if still open, stops serve and fails the test if
// serve failed.
func serveExporting(t *testing.T, args ...string) (cs *mcp.ClientSession, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errb := &lockedBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--http", "127.0.0.1:0"}, args...), strings.NewReader(""), io.Discard, errb)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	url := waitServing(t, errb, done)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "otel-client", Version: "1"}, nil).Connect(t.Context(),
		&mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cs, func() {
		t.Helper()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v\n%s", err, errb.String())
		}
		done <- nil // for the cleanup
	}
}

// agentSpan runs call inside a span of an agent's own, exported to jg by
// the OpenTelemetry SDK (as an agent that traces does), with the span's
// traceparent, and returns the span.
func agentSpan(t *testing.T, jg *jaeger, call func(traceparent string)) trace.SpanContext {
	t.Helper()
	x, err := otlptracehttp.New(t.Context(), otlptracehttp.WithEndpointURL(jg.otlp+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(x),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "test-agent"))))
	_, span := tp.Tracer("agent").Start(t.Context(), "agent turn")
	parent, _ := tracectx.Format(span.SpanContext())
	call(parent)
	span.End()
	if err := tp.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	return span.SpanContext()
}

// checkJoined waits until Jaeger holds the ledger's span id in agent's
// trace, as the child of agent's span, beside that span.
func checkJoined(t *testing.T, jg *jaeger, agent trace.SpanContext, id string) {
	t.Helper()
	var got []jspan
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		got = jg.trace(t, agent.TraceID().String())
		if len(got) >= 2 || time.Now().After(deadline) {
			break
		}
	}
	var ledger, parent *jspan
	for i, s := range got {
		switch {
		case strings.EqualFold(s.SpanID, id):
			ledger = &got[i]
		case strings.EqualFold(s.SpanID, agent.SpanID().String()):
			parent = &got[i]
		}
	}
	if ledger == nil || parent == nil || len(got) != 2 {
		t.Fatalf("jaeger's trace %s: %+v; want the agent's span %s and the ledger's %s", agent.TraceID(), got, agent.SpanID(), id)
	}
	if !strings.EqualFold(ledger.Parent, agent.SpanID().String()) || ledger.Name != "tools/call echo" || parent.Name != "agent turn" {
		t.Errorf("in jaeger the ledger's span is %+v; want tools/call echo, child of the agent's span %s", *ledger, agent.SpanID())
	}
	t.Logf("jaeger holds the ledger's span %s in the agent's trace %s, child of its span %s", id, agent.TraceID(), agent.SpanID())
}

// TestLiveExportBadSetting: an OTEL_* setting that cannot work (here
// another program's OTLP/JSON telemetry), or a flag (--otlp-protocol
// http/json), does not stop run: one warning says there is no export
// this session and what to do; the session runs.
func TestLiveExportBadSetting(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mcpledger processes")
	}
	dir := t.TempDir()
	cfg := faultConfig(t, dir, false)
	jp := filepath.Join(dir, "journal.db")
	code, out := runCLIProcess(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL=http/json"},
		"run", "--once", "--journal", jp, "--mcp-config", cfg, "--workspace", dir)
	if code != 0 || strings.Count(out, "no OTLP export this session") != 1 || !strings.Contains(out, "OTEL_EXPORTER_OTLP_PROTOCOL") {
		t.Errorf("run --once with OTEL_EXPORTER_OTLP_PROTOCOL=http/json: exit %d\n%s", code, out)
	}
	code, out = runCLIProcess(t, nil, "run", "--once", "--otlp-endpoint", "http://127.0.0.1:4318", "--otlp-protocol", "http/json",
		"--journal", jp, "--mcp-config", cfg, "--workspace", dir)
	if code != 0 || strings.Count(out, "no OTLP export this session") != 1 || !strings.Contains(out, `--otlp-protocol="http/json"`) {
		t.Errorf("run --once --otlp-protocol http/json: exit %d\n%s", code, out)
	}
}

// checkCursorAtEnd checks that the journal at jp keeps its export cursor
// at its last event (run stopped, every event acknowledged).
func checkCursorAtEnd(t *testing.T, jp string) {
	t.Helper()
	j, err := store.Open(jp, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	c, err := j.Cursor(t.Context(), shipCursor)
	var last uint64
	_ = j.ReadAll(t.Context(), 1, func(e events.Event) error { last = e.GPos; return nil })
	j.Close()
	if err != nil || c.GPos != last {
		t.Errorf("the journal's cursor after run stopped: %+v, %v; want at the last event, %d", c, err, last)
	}
}
