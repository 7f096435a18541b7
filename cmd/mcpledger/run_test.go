package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
	"github.com/mcpledger/mcpledger/store"
)

// TestRunOnceAndOfflineCommands runs `run --once` against a real stdio
// server, then reads status, tools and the log from the journal offline,
// and makes a one-shot call.
func TestRunOnceAndOfflineCommands(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "mcp.json")
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"good": map[string]any{"command": bin},
		"dead": map[string]any{"command": bin, "env": map[string]string{"MCPTEST_CRASH_ON_START": "1"}},
	}})
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	jp := filepath.Join(dir, "j.db")
	t.Setenv("MCPLEDGER_JOURNAL", jp)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "xdg"))
	t.Setenv("MCPLEDGER_DECIDER", `{"backoff_base_ms":10,"backoff_max_ms":20,"max_attempts":2}`)
	var out, errb bytes.Buffer
	ctx := context.Background()
	err := run(ctx, []string{"run", "--once", "--mcp-config", cfg, "--workspace", dir}, nil, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "1 server(s) ended failed") {
		t.Fatalf("run --once: err %v\nstdout %s\nstderr %s", err, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "good") || !strings.Contains(out.String(), "ready") {
		t.Errorf("status table: %s", out.String())
	}
	out.Reset()
	if err := run(ctx, []string{"status", "--json"}, nil, &out, &errb); err != nil {
		t.Fatal(err)
	}
	var st struct {
		Session string `json:"session"`
		Servers []struct {
			Name, State, Reason string
		} `json:"servers"`
	}
	if err := json.Unmarshal(out.Bytes(), &st); err != nil || len(st.Servers) != 2 {
		t.Fatalf("status --json: %v %s", err, out.String())
	}
	for _, s := range st.Servers {
		want := map[string]string{"good": "ready", "dead": "failed"}[s.Name]
		if s.State != want {
			t.Errorf("%s: %s, want %s", s.Name, s.State, want)
		}
	}
	out.Reset()
	if err := run(ctx, []string{"tools", "--json"}, nil, &out, &errb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"name":"mcp__good__echo"`) {
		t.Errorf("tools --json: %s", out.String())
	}
	out.Reset()
	if err := run(ctx, []string{"call", "mcp__good__echo", "--args", `{"message":"one shot"}`, "--mcp-config", cfg, "--workspace", dir}, nil, &out, &errb); err != nil {
		t.Fatalf("call: %v\n%s", err, errb.String())
	}
	if strings.TrimSpace(out.String()) != "one shot" {
		t.Errorf("call output %q", out.String())
	}
	out.Reset()
	if err := run(ctx, []string{"verify"}, nil, &out, &errb); err != nil {
		t.Fatalf("verify: %v %s", err, out.String())
	}
}

// TestDeciderEnvRefused: MCPLEDGER_DECIDER that is not a JSON object of
// known fields, or holds a value the decider cannot honour, stops the
// command before a session starts, with the variable named.
func TestDeciderEnvRefused(t *testing.T) {
	for name, c := range map[string]struct{ env, want string }{
		"unknown field":   {`{"storm_limt":4}`, `unknown field "storm_limt"`},
		"not an object":   {`5`, "want a JSON object"},
		"storm limit":     {`{"storm_limit":65}`, "storm_limit is 65, at most 64 (to let more launches through, shorten storm_window_ms)"},
		"backoff too big": {`{"backoff_max_ms":9223372036854775807}`, "backoff_max_ms is 9223372036854775807, at most 86400000"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			jp := filepath.Join(dir, "j.db")
			t.Setenv("MCPLEDGER_JOURNAL", jp)
			t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "xdg"))
			t.Setenv("MCPLEDGER_DECIDER", c.env)
			var out, errb bytes.Buffer
			err := run(context.Background(), []string{"run", "--once", "--workspace", dir}, nil, &out, &errb)
			if err == nil || !strings.Contains(err.Error(), "MCPLEDGER_DECIDER: ") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want MCPLEDGER_DECIDER: ... %s", err, c.want)
			}
			if _, err := os.Stat(jp); errors.Is(err, os.ErrNotExist) {
				return
			}
			j, err := store.Open(jp, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			n := 0
			if err := j.ReadAll(t.Context(), 1, func(events.Event) error { n++; return nil }); err != nil || n != 0 {
				t.Errorf("the journal holds %d events (%v): a refused setting must not start a session", n, err)
			}
		})
	}
}
