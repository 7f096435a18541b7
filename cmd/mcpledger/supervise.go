package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/fsm"
	"github.com/mcpledger/mcpledger/projections"
	rt "github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/config"
	"github.com/mcpledger/mcpledger/runtime/oauth"
)

// configFlags are the flags of commands that load the configuration.
type configFlags struct {
	configs   []string
	workspace string
	allowed   string
	verbose   bool
	// files are the config files the first reading consulted (options).
	files []string
	// flagsOnly reads the --mcp-config files alone: not the user's config
	// nor Claude Code's ~/.claude.json (the demo runs its own servers).
	flagsOnly bool
}

type multiFlag struct{ vals *[]string }

func (m multiFlag) String() string { return "" }

// Type names the flag's kind in pflag's help and to cobra's completion,
// which offers a flag of a kind ending in "Array" again after it was set.
func (m multiFlag) Type() string { return "stringArray" }
func (m multiFlag) Set(v string) error {
	*m.vals = append(*m.vals, v)
	return nil
}

func (c *configFlags) register(f *commandFlags) {
	f.Var(multiFlag{&c.configs}, "mcp-config", "config `FILE` (repeatable; highest priority, earlier files win)")
	f.StringVar(&c.workspace, "workspace", "", "workspace `DIR` whose .mcp.json is read (default: current directory)")
	f.StringVar(&c.allowed, "allowed-servers", "", "comma-separated upper bound on which `SERVERS` may run (settings can narrow it, never widen it)")
	f.BoolVar(&c.verbose, "verbose", false, "log runtime warnings to stderr")
}

// maxConfigEnv raises the size limit of a config file (bytes).
const maxConfigEnv = "MCPLEDGER_CONFIG_MAX_BYTES"

// maxConfigBytes reads MCPLEDGER_CONFIG_MAX_BYTES: 0 (the default) when
// it is unset.
func maxConfigBytes(e *env) (int64, error) {
	s := e.getenv(maxConfigEnv)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s=%q: want a number of bytes above 0, like %d (the default)", maxConfigEnv, s, config.DefaultMaxFileBytes)
	}
	return n, nil
}

// loader returns the config loader the runtime calls at start and reload.
// A malformed MCPLEDGER_CONFIG_MAX_BYTES leaves the default limit (options
// refuses it first).
func (c *configFlags) loader(e *env) func() config.Reading {
	ws := c.workspace
	if ws == "" {
		ws, _ = os.Getwd()
	}
	home := e.getenv("HOME")
	lookup := func(k string) (string, bool) { return os.LookupEnv(k) }
	src := config.Sources{Flags: c.configs, Workspace: ws, UserDir: config.UserDir(lookup, home),
		ClaudeFile: claudeFile(e), LookupEnv: lookup, Home: home, RaiseLimit: "raise the limit: " + maxConfigEnv + "=BYTES"}
	src.MaxFileBytes, _ = maxConfigBytes(e)
	src.Self = runsGateway
	if c.flagsOnly {
		src.UserDir, src.ClaudeFile = "", ""
	}
	if c.allowed != "" {
		src.HasLaunchBound = true
		for _, s := range strings.Split(c.allowed, ",") {
			if s = strings.TrimSpace(s); s != "" {
				src.LaunchBound = append(src.LaunchBound, s)
			}
		}
	}
	return func() config.Reading { return config.Load(src) }
}

// options returns the runtime options of a command that starts a
// session. It reads the configuration first: a file that cannot be used
// refuses the start with a configError (its servers would be missing
// without a word), and the reading's warnings are printed. The runtime's
// first reading is this one; reloads read again.
func (c *configFlags) options(e *env, command string) (*rt.Options, error) {
	if _, err := maxConfigBytes(e); err != nil {
		return nil, err
	}
	load := c.loader(e)
	first := load()
	if err := first.Err(); err != nil {
		return nil, &configError{err: err}
	}
	for _, w := range first.Warnings {
		fmt.Fprintln(e.stderr, "config: warning:", w)
	}
	c.files = first.Files
	var once sync.Once
	cfg := func() config.Reading {
		r, reread := first, true
		once.Do(func() { reread = false })
		if reread {
			r = load()
		}
		return r
	}
	o := &rt.Options{Config: cfg, Command: command, Build: buildID(), Version: version()}
	// Remote servers' sign-ins (mcpledger login): without a state or home
	// directory there is no token store, and a server that asks for a
	// sign-in fails as any other handshake.
	if path, err := oauth.DefaultStorePath(e.getenv); err == nil {
		o.OAuthStore = oauth.NewStore(path)
	}
	// This binary is the runtime's reaper too (main calls
	// RunShimIfRequested): servers' process groups end even if mcpledger
	// is killed.
	if exe, err := os.Executable(); err == nil {
		o.ShimPath = exe
	}
	// MCPLEDGER_DECIDER tunes backoff, attempts, the storm breaker and ping
	// failures: a JSON object of events.DeciderOptions fields, e.g.
	// {"backoff_base_ms":500,"max_attempts":8}. Unset fields keep defaults.
	if s := e.getenv("MCPLEDGER_DECIDER"); s != "" {
		dec := json.NewDecoder(strings.NewReader(s))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&o.Decider); err != nil {
			return nil, fmt.Errorf("MCPLEDGER_DECIDER: %w (want a JSON object such as {\"backoff_base_ms\":500,\"max_attempts\":8})", err)
		}
		if err := fsm.CheckOptions(o.Decider); err != nil {
			return nil, fmt.Errorf("MCPLEDGER_DECIDER: %w", err)
		}
	}
	if c.verbose {
		o.Logger = slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return o, nil
}

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

func buildID() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	s := bi.GoVersion
	for _, kv := range bi.Settings {
		if kv.Key == "vcs.revision" {
			s += " " + kv.Value
		}
	}
	return s
}

// printStatus writes a table of one line per server: name, state,
// reason, transport, tools, attempt, since, error; its columns as wide as
// their content.
func printStatus(w io.Writer, st style, rows []projections.ServerStatus, now time.Time, stateColumn string) {
	if len(rows) == 0 {
		fmt.Fprintln(w, "no servers")
		return
	}
	t := newTable([]string{"SERVER", stateColumn, "REASON", "TRANSPORT", "TOOLS", "ATTEMPT", "SINCE", "ERROR"}, "TOOLS", "ATTEMPT", "SINCE")
	for _, s := range rows {
		since := "-"
		if s.Since > 0 {
			since = now.Sub(time.Unix(0, s.Since)).Round(time.Second).String()
		}
		t.add(s.Name, st.state(s.State), dash(string(s.Reason)), string(s.Transport), strconv.Itoa(s.Tools), strconv.Itoa(s.Attempt), since, s.Error)
	}
	t.write(w)
	for _, s := range rows {
		if line := authLine(s, now); line != "" {
			fmt.Fprintf(w, "%s: %s\n", s.Name, line)
		}
	}
}

// authLine says where a remote server's OAuth sign-in stands, "" for a
// server that never asked for one.
func authLine(s projections.ServerStatus, now time.Time) string {
	a := s.Auth
	switch {
	case s.Reason == events.ReasonNeedsAuth || a != nil && a.NeedsAuth:
		line := "needs a sign-in: run mcpledger login " + s.Name
		if a != nil && a.Failure != nil {
			line += " (the last attempt failed at " + a.Failure.Phase + ": " + a.Failure.Error + ")"
		}
		return line
	case a == nil:
		return ""
	case a.SignedIn:
		line := "signed in at " + dash(a.Issuer)
		if len(a.Scopes) > 0 {
			line += ", scopes " + strings.Join(a.Scopes, " ")
		}
		if a.ExpiresAt != 0 {
			if left := time.Unix(0, a.ExpiresAt).Sub(now).Round(time.Second); left > 0 {
				line += ", token valid for " + left.String()
			} else {
				line += ", token expired (refreshed on the next request)"
			}
		}
		if a.Failure != nil {
			line += "; last failure at " + a.Failure.Phase + ": " + a.Failure.Error
		}
		return line
	case a.SignedOutAt != 0:
		return "signed out"
	}
	return ""
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
