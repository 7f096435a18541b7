package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"
)

// CallPolicy says whether a tool call needs approval before it is sent.
type CallPolicy string

const (
	// PolicyAlways sends every call (the default: most agents have their
	// own approval UI).
	PolicyAlways CallPolicy = "always"
	// PolicyNever denies every call; the server never sees it.
	PolicyNever CallPolicy = "never"
	// PolicyAsk consults Options.Approver, or the user when the caller is
	// the user (mcpledger call); with neither, the call is denied.
	PolicyAsk CallPolicy = "ask"
)

// Valid reports whether p is always, never or ask.
func (p CallPolicy) Valid() bool { return p == PolicyAlways || p == PolicyNever || p == PolicyAsk }

// maxResultChars is the largest "maxResultChars" taken (1<<40: larger
// than any result a server can send).
const maxResultChars = 1 << 40

// CallSettings are a server's call settings from its config entry:
// "callPolicy": "ask", "toolPolicies": {"delete_repo": "never"},
// "toolTimeouts": {"slow_query": 300000} (milliseconds), "maxResultChars":
// 100000 (the bound of a result's rendered text; 0: none). They are not part
// of the journaled config or its hash; each decision journals the policy
// it applied.
type CallSettings struct {
	Policy       CallPolicy
	ToolPolicies map[string]CallPolicy
	ToolTimeouts map[string]time.Duration
	// MaxResultChars, when set, bounds the server's results in characters
	// instead of the runtime's default (0: no bound).
	MaxResultChars *int
}

// parseField reads "callPolicy", "toolPolicies", "toolTimeouts" or
// "maxResultChars"; the result is a problem to report
// ("" when fine).
func (cs *CallSettings) parseField(key string, val []byte) string {
	switch key {
	case "callPolicy":
		var p CallPolicy
		if json.Unmarshal(val, &p) != nil || !p.Valid() {
			return `"callPolicy" must be "always", "never" or "ask"`
		}
		cs.Policy = p
	case "toolPolicies":
		var m map[string]CallPolicy
		if json.Unmarshal(val, &m) != nil {
			return `"toolPolicies" must be an object of tool name to "always", "never" or "ask"`
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if !m[k].Valid() {
				return fmt.Sprintf(`"toolPolicies": %q must be "always", "never" or "ask"`, k)
			}
		}
		cs.ToolPolicies = m
	case "toolTimeouts":
		var m map[string]float64
		if json.Unmarshal(val, &m) != nil {
			return `"toolTimeouts" must be an object of tool name to milliseconds, like {"slow_query": 300000}`
		}
		cs.ToolTimeouts = map[string]time.Duration{}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			ms := m[k]
			if ms <= 0 || ms > maxTimeoutMs || ms != float64(int64(ms)) {
				return fmt.Sprintf(`"toolTimeouts": %q must be a positive whole number of milliseconds`, k)
			}
			cs.ToolTimeouts[k] = time.Duration(ms) * time.Millisecond
		}
	case "maxResultChars":
		var n float64
		if json.Unmarshal(val, &n) != nil || n < 0 || n > maxResultChars || n != float64(int64(n)) {
			return `"maxResultChars" must be a whole number of characters, 0 or more, like 100000 (0: results are not bounded)`
		}
		v := int(n)
		cs.MaxResultChars = &v
	}
	return ""
}
