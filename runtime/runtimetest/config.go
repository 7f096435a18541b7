package runtimetest

import (
	"strings"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime/config"
)

// Stdio returns the journaled config and the resolved spec of a stdio
// server named name that runs command with args and env (KEY=VALUE), as
// config.Load would produce them from a --mcp-config file.
func Stdio(name, command string, args []string, env ...string) (events.ServerConfig, config.Spec) {
	c := events.ServerConfig{Name: name, Scope: events.ScopeFlag, Transport: events.TransportStdio, Command: command, Args: args}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		c.Env = append(c.Env, events.KV{Key: k, Value: v})
	}
	c.Env = events.RedactKVs(c.Env)
	c.Hash = events.ConfigHash(&c)
	return c, config.Spec{Config: c, Command: command, Args: args, Env: env}
}

// ConfigOf returns a runtime.Options.Config that always reads the given
// servers: pairs of (events.ServerConfig, config.Spec), as Stdio returns
// them.
func ConfigOf(entries ...any) func() config.Reading {
	lc := config.Reading{Specs: map[string]config.Spec{}}
	for i := 0; i < len(entries); i += 2 {
		c := entries[i].(events.ServerConfig)
		lc.Observed.Servers = append(lc.Observed.Servers, c)
		lc.Specs[c.Name] = entries[i+1].(config.Spec)
	}
	return func() config.Reading { return lc }
}
