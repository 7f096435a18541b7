package gateway

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestSealedState: a requestState sealed for a call verifies for that call
// (its arguments compared as JSON, not bytes), and is refused, saying why,
// for another call, altered, foreign, expired or from another gateway.
func TestSealedState(t *testing.T) {
	g := New(&Options{ForwardTimeout: time.Minute})
	defer g.Close()
	args := json.RawMessage(`{"a": 1, "b": [2]}`)
	st := g.seal(sealed{Name: "t", Args: argsDigest(args), Approved: "elicitation:c/1", Upstream: "up-state"})
	s, err := g.unseal(st, "t", json.RawMessage(`{"a":1,"b":[2]}`))
	if err != nil || s.Approved != "elicitation:c/1" || s.Upstream != "up-state" {
		t.Fatalf("unseal: %+v %v", s, err)
	}
	other := New(nil)
	defer other.Close()
	g.opts.ForwardTimeout = -time.Minute // sealed already expired
	expired := g.seal(sealed{Name: "t", Args: argsDigest(args)})
	for _, c := range []struct {
		name, state, tool string
		args              json.RawMessage
		why               string
	}{
		{"other tool", st, "u", args, "another call"},
		{"other arguments", st, "t", json.RawMessage(`{"a":2,"b":[2]}`), "another call"},
		{"altered", st[:len(st)-2] + "AA", "t", args, "integrity"},
		{"foreign", "up-state", "t", args, "not issued by this gateway"},
		{"another gateway's", other.seal(sealed{Name: "t", Args: argsDigest(args)}), "t", args, "integrity"},
		{"expired", expired, "t", args, "expired"},
	} {
		_, err := g.unseal(c.state, c.tool, c.args)
		if !errors.Is(err, errBadState) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: %v, want %q", c.name, err, c.why)
		}
	}
}

// TestStatelessBody: which sessionless POST bodies go to the stateless
// handler.
func TestStatelessBody(t *testing.T) {
	for body, want := range map[string]bool{
		`{"jsonrpc":"2.0","id":1,"method":"server/discover"}`:                                                  true,
		` {"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`: true,
		`{"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}}`:  false,
		`{"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":7}}}`:             false,
		`{"method":"initialize","params":{"protocolVersion":"2026-07-28"}}`:                                    false,
		`[{"method":"server/discover"}]`: false,
		`{"method":"server/discover"`:    false,
		``:                               false,
	} {
		if got := statelessBody([]byte(body)); got != want {
			t.Errorf("%s: %v, want %v", body, got, want)
		}
	}
}
