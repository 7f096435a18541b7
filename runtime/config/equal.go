package config

import (
	"slices"

	"github.com/mcpledger/mcpledger/events"
)

// Equal reports whether two config readings are the same for the
// purpose of hot reload, so a reload that changed nothing can be skipped.
// Trigger is ignored. Servers compare by name, whatever their order, and
// every field except RecentLaunches, RecentCrashes and Approval counts; args order
// counts, env and header order does not, tool filters compare as sets, an
// absent oauth object equals an empty one.
// Allowed, Excluded, LaunchBound, Errors and Shadowed compare as sets, but an
// absent allow-list or launch bound differs from an empty one (absent
// allows all, empty denies all). Nil and empty slices are equal otherwise.
func Equal(a, b events.ConfigObserved) bool {
	if a.Workspace != b.Workspace || a.Trusted != b.Trusted ||
		(a.HasAllowed || a.Allowed != nil) != (b.HasAllowed || b.Allowed != nil) ||
		a.HasLaunchBound != b.HasLaunchBound ||
		!setEqual(a.Allowed, b.Allowed) || !setEqual(a.Excluded, b.Excluded) ||
		!setEqual(a.LaunchBound, b.LaunchBound) || !setEqual(a.Errors, b.Errors) ||
		!shadowedEqual(a.Shadowed, b.Shadowed) || len(a.Servers) != len(b.Servers) {
		return false
	}
	bs := make(map[string]*events.ServerConfig, len(b.Servers))
	for i := range b.Servers {
		bs[b.Servers[i].Name] = &b.Servers[i]
	}
	for i := range a.Servers {
		x, y := &a.Servers[i], bs[a.Servers[i].Name]
		if y == nil || !serverEqual(x, y) {
			return false
		}
		delete(bs, x.Name) // a duplicate name in a then fails to match
	}
	return true
}

func serverEqual(x, y *events.ServerConfig) bool {
	return x.Name == y.Name && x.Source == y.Source && x.Scope == y.Scope &&
		x.Transport == y.Transport && x.Command == y.Command &&
		slices.Equal(x.Args, y.Args) && kvSetEqual(x.Env, y.Env) &&
		x.Cwd == y.Cwd && x.URL == y.URL && kvSetEqual(x.Headers, y.Headers) &&
		x.Disabled == y.Disabled && x.TimeoutMs == y.TimeoutMs &&
		x.ProtocolVersion == y.ProtocolVersion &&
		setEqual(x.IncludeTools, y.IncludeTools) && setEqual(x.ExcludeTools, y.ExcludeTools) &&
		oauthEqual(x.OAuth, y.OAuth) &&
		x.Hash == y.Hash && x.Invalid == y.Invalid && x.Gated == y.Gated
}

// oauthEqual compares two oauth objects field by field; an absent one
// equals one that sets nothing.
func oauthEqual(a, b *events.OAuthConfig) bool {
	if a.IsZero() || b.IsZero() {
		return a.IsZero() == b.IsZero()
	}
	return a.ClientID == b.ClientID && a.ClientSecret == b.ClientSecret && a.CallbackPort == b.CallbackPort &&
		slices.Equal(a.Scopes, b.Scopes) && a.AuthServerMetadataURL == b.AuthServerMetadataURL &&
		a.ClientMetadataURL == b.ClientMetadataURL
}

func shadowedEqual(a, b []events.ShadowedServer) bool {
	key := func(ss []events.ShadowedServer) []string {
		out := make([]string, len(ss))
		for i, s := range ss {
			out[i] = s.Name + "\x00" + s.At + "\x00" + s.Winner
		}
		return out
	}
	return setEqual(key(a), key(b))
}

func setEqual(a, b []string) bool {
	return slices.Equal(sortedSet(a), sortedSet(b))
}

func kvSetEqual(a, b []events.KV) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = slices.Clone(a), slices.Clone(b)
	events.SortKVs(a)
	events.SortKVs(b)
	return slices.Equal(a, b)
}
