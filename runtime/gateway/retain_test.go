package gateway_test

import (
	"runtime"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/runtime/gateway"
)

// An idle session does not keep its last large request. go-sdk keeps a
// session's last request until its next one arrives, so without the
// gateway's flush every idle session that last received a big body holds
// it (MaxSessions × the body limit in all). What a connection to an
// upstream server keeps (its decoder's buffer, sized to the largest
// message; the last message each way) is per server, not per session: so
// the heap is measured after a first round of big calls, and must not
// grow with a second round on other sessions.
func TestGatewayHTTPForgetsLargeRequests(t *testing.T) {
	up, _ := upstream("up")
	f := startGateway(t, nil, nil, map[string]*mcp.Server{"up": up})
	srv := httptestServer(t, f, f.gw.HTTPHandler(&gateway.HTTPOptions{}))
	endpoint := srv.URL + gateway.Path
	const round, size = 4, 3 << 20
	big := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"mcp__up__echo","arguments":{"message":"` +
		strings.Repeat("y", size) + `"}}}`
	var ids []string
	bigCalls := func() {
		for range round {
			id := rawSession(t, endpoint)
			if resp, body := rawPost(t, endpoint, id, big); resp.StatusCode != 200 {
				t.Fatalf("big call: %d %.200s", resp.StatusCode, body)
			}
			ids = append(ids, id)
		}
	}
	live := func() int64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	bigCalls()
	first := live()
	bigCalls()
	if grown := live() - first; grown > size {
		t.Errorf("the heap grew %.1f MiB with %d more idle sessions that each received a %d MiB request (want under %d MiB: none kept)",
			float64(grown)/(1<<20), round, size>>20, size>>20)
	}
	for _, id := range ids { // the sessions still work
		if resp, body := rawPost(t, endpoint, id, pingBody); resp.StatusCode != 200 {
			t.Fatalf("ping after the big call: %d %s", resp.StatusCode, body)
		}
	}
}
