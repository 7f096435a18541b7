package projections

import (
	"path"
	"slices"

	"github.com/mcpledger/mcpledger/events"
)

// toolFilter is a server's IncludeTools/ExcludeTools from its config.
type toolFilter struct {
	include []string
	exclude []string
}

// newToolFilter copies the lists so later changes to the config do not
// reach the filter.
func newToolFilter(include, exclude []string) toolFilter {
	return toolFilter{include: slices.Clone(include), exclude: slices.Clone(exclude)}
}

// keeps reports whether the tool named name (the server's own name for it)
// passes the filter. With a non-empty include list only names matching one
// of its patterns pass; a name matching an exclude pattern never passes.
// Patterns use [path.Match] syntax. A pattern that is malformed fails, and a
// failing filter excludes the tool: keeps is false whenever any pattern of
// either list is malformed, whatever the other patterns say.
func (f toolFilter) keeps(name string) bool {
	included := len(f.include) == 0
	for _, p := range f.include {
		ok, err := path.Match(p, name)
		if err != nil {
			return false
		}
		included = included || ok
	}
	if !included {
		return false
	}
	for _, p := range f.exclude {
		ok, err := path.Match(p, name)
		if err != nil || ok {
			return false
		}
	}
	return true
}

// eachTool calls fn for every tool of ts that passes f, in list order,
// skipping a name the list already had (a server that lists a name twice
// gets its first definition). seen is scratch space, cleared on entry.
func (f toolFilter) eachTool(ts []events.Tool, seen map[string]struct{}, fn func(*events.Tool)) {
	clear(seen)
	for i := range ts {
		t := &ts[i]
		if _, dup := seen[t.Name]; dup {
			continue
		}
		seen[t.Name] = struct{}{}
		if f.keeps(t.Name) {
			fn(t)
		}
	}
}
