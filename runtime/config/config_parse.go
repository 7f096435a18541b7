package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime/guard"
)

// This file reads one config file: JSONC cleanup, the top-level shape and
// one server entry at a time. Nothing here does I/O; Load
// (config.go) reads the files, merges the sources and expands ${VAR}.

// configFile is what one source file yielded.
type configFile struct {
	servers     []parsedServer // file order, one per name
	settings    userSettings   // only filled for the user config
	errs        []string       // the file is unusable: no servers, no settings
	settingErrs []string       // a malformed setting (the servers still load)
	warnings    []string
}

// parsedServer is one entry as written. cfg is already safe to journal:
// its Env and Headers hold digests. The as-written values stay in env
// and headers, for expansion only.
type parsedServer struct {
	cfg      events.ServerConfig
	pos      string              // where the entry is: "path:line:col"
	env      []events.KV         // as written, sorted by key
	headers  []events.KV         // as written, sorted by key
	args     []string            // as written (cfg.Args is redacted: see guard.RedactArgs)
	url      string              // as written (cfg.URL is redacted)
	oauth    *events.OAuthConfig // as written (cfg.OAuth holds the secret's digest)
	problems []string            // each one says what to do; non-empty => Invalid
	warnings []string
	call     CallSettings // callPolicy, toolPolicies, toolTimeouts, maxResultChars
}

// userSettings are the admission and trust settings of the user config.
type userSettings struct {
	allowed        []string
	hasAllowed     bool
	excluded       []string
	trustedFolders []string
	projectOff     bool // enableProjectConfig: false
	claudeOff      bool // enableClaudeCodeConfig: false
}

// member is one key of a JSON object with the absolute offset of its value.
type member struct {
	key string
	val []byte
	off int
}

// Top-level keys.
const (
	keyServers      = "mcpServers"
	keyServersAlias = "servers" // VS Code's mcp.json
	keyAllowed      = "allowed"
	keyExcluded     = "excluded"
	keyTrusted      = "trustedFolders"
	keyEnableProj   = "enableProjectConfig"
)

// parseConfigFile parses one source file. withSettings is true for the
// user config only: settings in any other file are ignored with a
// warning, so a cloned repository can neither trust itself nor widen
// admission.
func parseConfigFile(path string, data []byte, scope events.Scope, withSettings bool) configFile {
	var f configFile
	data = stripJSONC(data)
	if len(bytes.TrimSpace(data)) == 0 {
		f.errs = append(f.errs, path+`: the file is empty (or holds only comments); write {"mcpServers": {}} for a file without servers, or remove it`)
		return f
	}
	if err := json.Unmarshal(data, new(json.RawMessage)); err != nil {
		off := 0
		var se *json.SyntaxError
		if errors.As(err, &se) {
			off = int(se.Offset) - 1 // Offset counts the offending byte
		}
		// Input that ends too early reports no useful offset: parsing it
		// again with one more (invalid) byte fails exactly at that byte.
		if errors.As(json.Unmarshal(append(slices.Clip(data), 0), new(json.RawMessage)), &se) && int(se.Offset) == len(data)+1 {
			off = len(data)
		}
		msg := strings.TrimPrefix(err.Error(), "json: ")
		f.errs = append(f.errs, fmt.Sprintf("%s: %s; fix the JSON syntax (the file is ignored until it parses)", position(path, data, off), msg))
		return f
	}
	top, ok := objectMembers(data, 0)
	if !ok {
		f.errs = append(f.errs, position(path, data, firstNonSpace(data, 0))+`: the file must hold a JSON object like {"mcpServers": {"name": {"command": "..."}}}; the file is ignored until it does`)
		return f
	}
	var lists [2][]member // mcpServers, servers
	for _, m := range top {
		switch m.key {
		case keyServers, keyServersAlias:
			if isNull(m.val) {
				f.errs = append(f.errs, fmt.Sprintf(`%s: %q is null; write an object mapping server names to entries, like {"name": {"command": "..."}}, or {} for none; the file is ignored until it is fixed`, position(path, data, m.off), m.key))
				continue
			}
			ms, ok := objectMembers(m.val, m.off)
			if !ok {
				f.errs = append(f.errs, fmt.Sprintf(`%s: %q must be an object mapping server names to entries, like {"name": {"command": "..."}}; the file is ignored until it is fixed`, position(path, data, m.off), m.key))
				continue
			}
			i := 0
			if m.key == keyServersAlias {
				i = 1
			}
			lists[i] = append(lists[i], ms...)
		case keyAllowed, keyExcluded, keyTrusted, keyEnableProj, keySettingClaude:
			if !withSettings {
				f.warnings = append(f.warnings, fmt.Sprintf("%s: %q is read only from the user config; ignored here", position(path, data, m.off), m.key))
				continue
			}
			f.settingErrs = append(f.settingErrs, f.settings.set(m, func(off int) string { return position(path, data, off) })...)
		default:
			f.warnings = append(f.warnings, fmt.Sprintf("%s: unknown top-level key %q ignored", position(path, data, m.off), m.key))
		}
	}
	if len(f.errs) > 0 {
		return configFile{errs: f.errs}
	}
	seen := map[string]int{} // name -> index in f.servers
	primary := map[string]bool{}
	for li, list := range lists {
		for _, m := range list {
			if li == 1 && primary[m.key] {
				f.warnings = append(f.warnings, fmt.Sprintf("%s: server %q is in both %q and %q; the %q entry is used", position(path, data, m.off), m.key, keyServers, keyServersAlias, keyServers))
				continue
			}
			ps := parseServer(path, data, m, scope)
			if i, dup := seen[m.key]; dup {
				f.warnings = append(f.warnings, fmt.Sprintf("%s: server %q is defined twice in this file; the last entry is used", position(path, data, m.off), m.key))
				f.servers[i] = ps
				continue
			}
			seen[m.key] = len(f.servers)
			f.servers = append(f.servers, ps)
			primary[m.key] = li == 0
		}
	}
	return f
}

// set applies one settings key. A malformed value fails closed where it
// can: a broken "allowed" denies all, a broken "enableProjectConfig"
// disables project configs, a broken "trustedFolders" trusts nothing.
func (s *userSettings) set(m member, at func(int) string) []string {
	if isNull(m.val) {
		return nil
	}
	switch m.key {
	case keyEnableProj:
		var b bool
		if err := json.Unmarshal(m.val, &b); err != nil {
			s.projectOff = true
			return []string{at(m.off) + `: "enableProjectConfig" must be true or false; project configs are ignored until it is fixed`}
		}
		s.projectOff = !b
		return nil
	case keySettingClaude:
		var b bool
		if err := json.Unmarshal(m.val, &b); err != nil {
			s.claudeOff = true
			return []string{at(m.off) + `: "enableClaudeCodeConfig" must be true or false; Claude Code's ~/.claude.json is not read until it is fixed`}
		}
		s.claudeOff = !b
		return nil
	}
	list, _, bad := stringArray(m.val)
	switch m.key {
	case keyAllowed:
		s.hasAllowed = true
		if bad {
			s.allowed = []string{}
			return []string{at(m.off) + `: "allowed" must be an array of server names; every server is denied until it is fixed`}
		}
		s.allowed = sortedSet(list)
	case keyExcluded:
		if bad {
			return []string{at(m.off) + `: "excluded" must be an array of server names; it is ignored until fixed`}
		}
		s.excluded = sortedSet(list)
	case keyTrusted:
		if bad {
			return []string{at(m.off) + `: "trustedFolders" must be an array of absolute directory paths; no folder is trusted until it is fixed`}
		}
		s.trustedFolders = list
	}
	return nil
}

// protocolVersionRe matches what "protocolVersion" may say: "auto" (speak
// 2026-07-28 to a server that offers it, else 2025-11-25) or a version,
// which pins it.
var protocolVersionRe = regexp.MustCompile(`^(auto|\d{4}-\d{2}-\d{2})$`)

// Entry fields.
var knownFields = []string{"type", "command", "args", "env", "cwd", "url", "headers",
	"disabled", "enabled", "timeout", "includeTools", "excludeTools", "protocolVersion",
	"callPolicy", "toolPolicies", "toolTimeouts", "maxResultChars", "oauth"}

// parseServer reads one server entry as written.
func parseServer(path string, data []byte, m member, scope events.Scope) (p parsedServer) {
	name := m.key
	p = parsedServer{cfg: events.ServerConfig{Name: name, Source: path, Scope: scope, Gated: scope == events.ScopeProject},
		pos: position(path, data, m.off)}
	defer func() {
		p.cfg.Env = events.RedactKVs(p.env)
		p.cfg.Headers = events.RedactKVs(p.headers)
		// People write tokens into args and URLs too (--api-key KEY,
		// https://x/?token=KEY): the journal and the hash take them
		// redacted, what runs takes them as written.
		p.args, p.url = p.cfg.Args, p.cfg.URL
		p.cfg.Args, p.cfg.URL = guard.RedactArgs(p.cfg.Args), guard.Redactor{}.RedactString(p.cfg.URL)
		p.cfg.OAuth = journaledOAuth(p.oauth)
		p.cfg.Hash = events.ConfigHash(&p.cfg)
		if len(p.problems) > 0 {
			p.cfg.Invalid = fmt.Sprintf("server %q: %s (%s)", name, strings.Join(p.problems, "; "), p.pos)
		}
	}()
	if name == "" || strings.ContainsFunc(name, isControl) {
		p.problems = append(p.problems, "the server name is empty or holds control characters: rename it")
	}
	fields, ok := objectMembers(m.val, m.off)
	if !ok {
		p.problems = append(p.problems, `the entry must be a JSON object like {"command": "..."} or {"url": "..."}`)
		return p
	}
	var typ string
	var hasType, hasOAuth bool
	var unknown []string
	for _, f := range fields {
		if isNull(f.val) {
			continue
		}
		var bad string
		switch f.key {
		case "type":
			bad = str(f.val, &typ, `"type" must be a string: "stdio", "http" or "sse"`)
			hasType = bad == ""
		case "command":
			bad = str(f.val, &p.cfg.Command, `"command" must be a string; put arguments in "args"`)
		case "cwd":
			bad = str(f.val, &p.cfg.Cwd, `"cwd" must be a string path`)
		case "url":
			bad = str(f.val, &p.cfg.URL, `"url" must be a string`)
		case "protocolVersion":
			bad = str(f.val, &p.cfg.ProtocolVersion, `"protocolVersion" must be a string: "auto" or a version like "2025-11-25"`)
			if bad == "" && !protocolVersionRe.MatchString(p.cfg.ProtocolVersion) {
				bad = fmt.Sprintf(`"protocolVersion" is %q: write "auto" (the default) or a protocol version like "2025-11-25"`, p.cfg.ProtocolVersion)
			}
		case "args":
			bad = strList(f.val, &p.cfg.Args, "args", false)
		case "includeTools":
			bad = strList(f.val, &p.cfg.IncludeTools, "includeTools", true)
		case "excludeTools":
			bad = strList(f.val, &p.cfg.ExcludeTools, "excludeTools", true)
		case "env":
			var w []string
			p.env, w, bad = kvObject(f, "env")
			p.warnings = append(p.warnings, w...)
		case "headers":
			var w []string
			p.headers, w, bad = kvObject(f, "headers")
			p.warnings = append(p.warnings, w...)
		case "disabled", "enabled":
			var b bool
			if json.Unmarshal(f.val, &b) != nil {
				bad = fmt.Sprintf("%q must be true or false", f.key)
			} else if b == (f.key == "disabled") {
				p.cfg.Disabled = true
			}
		case "timeout":
			p.cfg.TimeoutMs, bad = timeoutMs(f.val)
			if bad == "" && p.cfg.TimeoutMs > 0 && p.cfg.TimeoutMs < 1000 {
				p.warnings = append(p.warnings, fmt.Sprintf(`"timeout" is %d milliseconds; write %d for %d seconds`, p.cfg.TimeoutMs, p.cfg.TimeoutMs*1000, p.cfg.TimeoutMs))
			}
		case "callPolicy", "toolPolicies", "toolTimeouts", "maxResultChars":
			bad = p.call.parseField(f.key, f.val)
		case "oauth":
			var w, probs []string
			p.oauth, w, probs = parseOAuth(f)
			p.warnings, p.problems, hasOAuth = append(p.warnings, w...), append(p.problems, probs...), true
		default:
			unknown = append(unknown, f.key)
		}
		if bad != "" {
			p.problems = append(p.problems, bad)
		}
	}
	if len(unknown) > 0 {
		p.warnings = append(p.warnings, fmt.Sprintf("unknown fields ignored: %s (known: %s)", quoteAll(unknown), strings.Join(knownFields, ", ")))
	}
	p.transport(typ, hasType)
	if hasOAuth && p.cfg.Transport == events.TransportStdio {
		p.problems = append(p.problems, `"oauth" applies only to "http" and "sse" servers: remove it from this stdio entry (a stdio server takes its credentials from "env")`)
	}
	return p
}

// transport decides stdio or remote from "type", "command" and "url",
// and checks the combination.
func (p *parsedServer) transport(typ string, hasType bool) {
	c := &p.cfg
	switch strings.ToLower(typ) {
	case "":
		if hasType {
			p.problems = append(p.problems, `"type" is empty: write "stdio", "http" or "sse", or remove it`)
			return
		}
		switch {
		case c.Command != "" && c.URL != "":
			p.problems = append(p.problems, `both "command" and "url" are set: keep "command" for a stdio server or "url" for a remote one`)
			return
		case c.Command != "":
			c.Transport = events.TransportStdio
		case c.URL != "":
			c.Transport = events.TransportHTTP
		default:
			p.problems = append(p.problems, `"command" is empty: set "command" for a stdio server or "url" for a remote one`)
			return
		}
	case "stdio":
		c.Transport = events.TransportStdio
	case "http", "streamable-http", "streamablehttp":
		c.Transport = events.TransportHTTP
	case "sse":
		c.Transport = events.TransportSSE
	default:
		p.problems = append(p.problems, fmt.Sprintf(`"type" %q is not supported: use "stdio", "http" (also "streamable-http", "streamableHttp") or "sse"`, typ))
		return
	}
	if c.Transport == events.TransportStdio {
		switch {
		case c.URL != "" && c.Command != "":
			p.problems = append(p.problems, `both "command" and "url" are set: keep "command" for a stdio server or "url" for a remote one`)
		case c.URL != "":
			p.problems = append(p.problems, `"type" is "stdio" but only "url" is set: set "command", or write "type": "http" or "sse" for a remote server`)
		case c.Command == "":
			p.problems = append(p.problems, `"type" is "stdio" but "command" is empty: set "command"`)
		}
		if len(p.headers) > 0 {
			p.warnings = append(p.warnings, `"headers" are ignored for a stdio server`)
		}
		return
	}
	switch {
	case c.Command != "":
		p.problems = append(p.problems, fmt.Sprintf(`both "command" and "url" are set: a %q server needs only "url"; remove "command"`, c.Transport))
	case c.URL == "":
		p.problems = append(p.problems, fmt.Sprintf(`"type" is %q but "url" is empty: set "url"`, typ))
	case !strings.Contains(c.URL, "${"):
		if msg := checkURL(c.URL); msg != "" {
			p.problems = append(p.problems, msg)
		}
	}
	if len(c.Args) > 0 || c.Cwd != "" {
		p.warnings = append(p.warnings, `"args" and "cwd" are ignored for a remote server`)
	}
	seen := map[string]string{}
	for _, h := range p.headers {
		ck := http.CanonicalHeaderKey(h.Key)
		if prev, dup := seen[ck]; dup {
			p.problems = append(p.problems, fmt.Sprintf(`headers %q and %q are the same HTTP header: keep one`, prev, h.Key))
		}
		seen[ck] = h.Key
		if !validHeaderName(h.Key) {
			p.problems = append(p.problems, fmt.Sprintf(`header name %q is not a valid HTTP header name: use letters, digits and -`, h.Key))
		}
	}
}

// checkURL says what is wrong with a (resolved) server URL. It never
// quotes the URL: a resolved one may hold a secret.
func checkURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return `"url" must be an absolute http:// or https:// URL`
	}
	return ""
}

func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if r > 0x7e || r <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return true
}

func str(b []byte, dst *string, msg string) string {
	if json.Unmarshal(b, dst) != nil {
		return msg
	}
	return ""
}

// strList decodes an array of strings into dst; set lists are sorted and
// deduplicated.
func strList(b []byte, dst *[]string, field string, set bool) string {
	list, i, bad := stringArray(b)
	if bad {
		if i < 0 {
			return fmt.Sprintf("%q must be an array of strings", field)
		}
		return fmt.Sprintf("%q[%d] must be a string: quote it", field, i)
	}
	if set {
		list = sortedSet(list)
	}
	*dst = list
	return ""
}

// kvObject decodes an object of string values ("env", "headers"), sorted
// by key. Messages name keys, never values.
func kvObject(m member, field string) (kvs []events.KV, warnings []string, bad string) {
	ms, ok := objectMembers(m.val, m.off)
	if !ok {
		return nil, nil, fmt.Sprintf(`%q must be an object of string values, like {"KEY": "value"}`, field)
	}
	idx := map[string]int{}
	for _, e := range ms {
		var v string
		if json.Unmarshal(e.val, &v) != nil {
			return nil, nil, fmt.Sprintf(`%q key %q must have a string value: quote it`, field, e.key)
		}
		if field == "env" && (e.key == "" || strings.ContainsAny(e.key, "=\x00")) {
			return nil, nil, fmt.Sprintf(`"env" key %q is not a valid variable name: it must be non-empty without "="`, e.key)
		}
		if strings.ContainsRune(v, 0) {
			return nil, nil, fmt.Sprintf(`%q key %q has a NUL byte in its value: remove it`, field, e.key)
		}
		if i, dup := idx[e.key]; dup {
			warnings = append(warnings, fmt.Sprintf(`%q key %q is set twice; the last value is used`, field, e.key))
			kvs[i].Value = v
			continue
		}
		idx[e.key] = len(kvs)
		kvs = append(kvs, events.KV{Key: e.key, Value: v})
	}
	events.SortKVs(kvs)
	return kvs, warnings, ""
}

// maxTimeoutMs keeps a timeout inside time.Duration.
const maxTimeoutMs = math.MaxInt64 / 1_000_000 // ns per ms

func timeoutMs(b []byte) (int64, string) {
	var n json.Number
	if json.Unmarshal(b, &n) != nil {
		return 0, `"timeout" must be a number of milliseconds, like 30000`
	}
	if v, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
		return checkTimeout(float64(v), v)
	}
	f, err := strconv.ParseFloat(n.String(), 64) // 1e3, 30000.0, or out of int64 range
	if (err != nil && !errors.Is(err, strconv.ErrRange)) || f != math.Trunc(f) {
		return 0, `"timeout" must be a whole number of milliseconds, like 30000`
	}
	return checkTimeout(f, int64(min(max(f, 0), maxTimeoutMs)))
}

func checkTimeout(f float64, v int64) (int64, string) {
	switch {
	case f < 0:
		return 0, `"timeout" is negative: set milliseconds (like 30000) or remove it`
	case f > maxTimeoutMs:
		return 0, `"timeout" is too large: set milliseconds (like 30000) or remove it`
	}
	return v, ""
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// sortedSet returns a sorted copy of ss without duplicates, never nil.
func sortedSet(ss []string) []string {
	out := slices.Clone(ss)
	slices.Sort(out)
	out = slices.Compact(out)
	if out == nil {
		out = []string{}
	}
	return out
}
