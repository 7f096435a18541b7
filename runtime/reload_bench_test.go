package runtime_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime"
)

// BenchmarkReload measures a hot reload of 100 servers where one changed:
// from the config file being written (rename into place, as editors do)
// to the changed server being ready again with its new config, through
// the real watcher (fsnotify, debounce), semantic compare and reconcile.
// The 100 servers are Streamable HTTP endpoints on one loopback test
// server, so the machine's 2 cores are not spent on 100 processes. It
// reports restarts-unchanged: transitions of the 99 untouched servers,
// which must be 0. The debounce is 300 ms by default; the benchmark sets
// it to 10 ms so the figure is the reconcile's own cost, and reports the
// debounce separately.
//
//	go test ./runtime -run '^$' -bench Reload -benchtime 20x -count 5
func BenchmarkReload(b *testing.B) {
	srv := echoServer("bench")
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer ts.Close()
	const n = 100
	servers := func(version int) map[string]any {
		m := map[string]any{}
		for i := 0; i < n; i++ {
			m[fmt.Sprintf("s%03d", i)] = map[string]any{"type": "http", "url": fmt.Sprintf("%s/s%03d", ts.URL, i)}
		}
		// s000 is the one that changes: its URL carries the version.
		m["s000"] = map[string]any{"type": "http", "url": fmt.Sprintf("%s/s000?v=%d", ts.URL, version)}
		return m
	}
	w := newWorkspace(&testing.T{})
	w.t = nil
	_, adapter := openJournal(b)
	w.writeB(b, w.flags, map[string]any{"mcpServers": servers(0)})
	w.src.Flags = []string{w.flags}
	o := fastOpts(w.loader())
	o.Watch, o.Debounce = true, 10*time.Millisecond
	o.StartupTimeout = 30 * time.Second
	m, _ := runtime.New(adapter, o)
	rep, err := m.Start(b.Context())
	if err != nil || len(rep.Ready) != n {
		b.Fatalf("start: %v ready %d", err, len(rep.Ready))
	}
	defer m.Close()
	before := map[string]int{}
	for _, s := range m.Status() {
		before[s.Name] = s.Attempt
	}
	views, cancel := m.Subscribe()
	defer cancel()
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		want := before["s000"] + i
		w.writeB(b, w.flags, map[string]any{"mcpServers": servers(i)})
		for {
			v := <-views
			if s := state(v, "s000"); s.State == events.StateReady && s.Attempt == want {
				break
			}
		}
	}
	b.StopTimer()
	restarts := 0
	for _, s := range m.Status() {
		if s.Name != "s000" && s.Attempt != before[s.Name] {
			restarts++
		}
	}
	b.ReportMetric(float64(restarts), "restarts-unchanged")
	b.ReportMetric(float64(o.Debounce.Nanoseconds()), "debounce-ns")
	if restarts != 0 {
		b.Errorf("%d unchanged servers restarted", restarts)
	}
}
