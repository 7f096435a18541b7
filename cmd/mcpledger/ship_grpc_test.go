package main

// The export over OTLP/gRPC against a real backend: Jaeger v2's gRPC
// receiver (testdata/jaeger.yaml), with the helpers of
// ship_jaeger_test.go.

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpledger/mcpledger/events"
)

// TestExportToJaegerOverGRPC: `run` with OTEL_EXPORTER_OTLP_PROTOCOL=grpc
// and OTEL_EXPORTER_OTLP_ENDPOINT=http://host:port (plain text, as most
// agents set them) ships its calls to Jaeger's gRPC receiver as they are
// journaled; Jaeger killed: status shows the backlog, and once Jaeger is
// back on its port the calls made meanwhile arrive and status says the
// export is up to date; once run is stopped,
// the journal's cursor stands at its last event. The stopped journal
// shipped by `ship --otlp-protocol grpc` (the flag over a variable
// saying http/protobuf) to a fresh Jaeger gives the same spans, IDs and
// all.
func TestExportToJaegerOverGRPC(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Jaeger and mcpledger processes")
	}
	jg := startJaeger(t)
	dir := t.TempDir()
	cfg := faultConfig(t, dir, false)
	jp := filepath.Join(dir, "journal.db")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc") // run's child process inherits them
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", jg.grpc)
	holder := startRun(t, jp, cfg, dir)
	echoCalls(t, jp, 0, 3)
	live := callSpans(t, jp)
	if len(live) != 3 {
		t.Fatalf("%d call spans in the journal, want 3", len(live))
	}
	checkSpans(t, jg, live)
	waitUpToDate(t, jp) // the spans came first: wait for the logs' and points' acknowledgement

	jg.kill()
	echoCalls(t, jp, 3, 2)
	if lag := statusLag(t, jp); lag == nil || lag.Events < 2 {
		t.Errorf("status with Jaeger down: export %+v; want the calls' events behind", lag)
	}
	jg.start(t)
	all := callSpans(t, jp)
	checkSpans(t, jg, newer(live, all))
	waitUpToDate(t, jp)
	stopRun(t, holder)
	checkCursorAtEnd(t, jp)

	jg.kill()
	jg.start(t)
	// Over the wrong protocol ship would retry until interrupted.
	ship, out := cliProcess(t, []string{"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf"},
		"ship", "--otlp-protocol", "grpc", "--otlp-endpoint", jg.grpc, "--cursor", filepath.Join(dir, "again.cursor"), "--journal", jp)
	if err := ship.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ship.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ship --otlp-protocol grpc: %v\n%s", err, out.String())
		}
	case <-time.After(60 * time.Second):
		_ = ship.Process.Kill()
		<-done
		t.Fatalf("ship --otlp-protocol grpc did not end in 60 s:\n%s", out.String())
	}
	checkSpans(t, jg, all)
}

// waitUpToDate waits until status says the export of the journal at jp
// is up to date (every event acknowledged).
func waitUpToDate(t *testing.T, jp string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if lag := statusLag(t, jp); lag != nil && lag.Events == 0 {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("status: export %+v after 30 s, want up to date", lag)
		}
	}
}

// TestShipWrongProtocolToJaeger: OTLP/HTTP to Jaeger's gRPC port, and
// gRPC to its OTLP/HTTP port: ship keeps trying, says once what is wrong
// and what to try, and its cursor is not written.
func TestShipWrongProtocolToJaeger(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Jaeger and mcpledger processes")
	}
	jg := startJaeger(t)
	dir := t.TempDir()
	jp := filepath.Join(dir, "journal.db")
	j := mustCreate(t, jp)
	appendAll(t, j, events.NewID(), events.New(time.Now(), "", &events.SessionStarted{Seed: 1}))
	j.Close()
	for _, tc := range []struct {
		name, protocol, endpoint, want string
	}{
		{"http to the grpc port", "http/protobuf", jg.grpc, "the endpoint answers gRPC, not OTLP/HTTP: set OTEL_EXPORTER_OTLP_PROTOCOL=grpc (or --otlp-protocol grpc)"},
		{"grpc to the http port", "grpc", jg.otlp, "the endpoint answers OTLP/HTTP, not gRPC: give the collector's OTLP/gRPC port, 4317 usually"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cursor := filepath.Join(t.TempDir(), "ship.cursor")
			ship, out := cliProcess(t, nil, "ship", "--follow", "--otlp-protocol", tc.protocol, "--otlp-endpoint", tc.endpoint,
				"--cursor", cursor, "--journal", jp)
			if err := ship.Start(); err != nil {
				t.Fatal(err)
			}
			waitLine(t, out, "otlp export failing", 1)
			time.Sleep(time.Second) // several more tries
			_ = ship.Process.Signal(os.Interrupt)
			var ee *exec.ExitError
			if err := ship.Wait(); err != nil && !errors.As(err, &ee) {
				t.Fatal(err)
			}
			// Its own lines only: Go's HTTP client may add one of its
			// own ("Unsolicited response received on idle HTTP
			// channel") when the gRPC server's greeting comes first.
			if n := strings.Count(out.String(), "level="); n != 1 || !strings.Contains(out.String(), tc.want) {
				t.Errorf("want one line saying %q, got:\n%s", tc.want, out.String())
			}
			if _, err := os.Stat(cursor); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("cursor file written with nothing delivered: %v", err)
			}
		})
	}
}
