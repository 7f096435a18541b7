package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// An entry of equivalent.txt names one mutant that no test can kill because
// the mutated program behaves as the original does. It names the mutant by
// its file, its mutator and its source line, with the mutated token marked
// ⟦like this⟧, not by line number, so entries survive edits elsewhere in
// the file and go stale (and fail the check) when the line itself changes.
//
//	store/writer.go | CONDITIONALS_BOUNDARY | if n ⟦>⟧ 0 { | n is never negative: > 0 and >= 0 differ only at 0, where both paths write nothing
type entry struct {
	Path, Type, Line, Reason string
	At                       string // where in equivalent.txt, for messages
	n                        int    // the line number of At, for ordering
}

func (e entry) key() string { return e.Path + "|" + e.Type + "|" + e.Line }

const (
	markOpen  = "⟦"
	markClose = "⟧"
)

var errEquivalentFile = errors.New("mutants: bad equivalent-mutant list")

// parseEntries reads equivalent.txt: one entry a line, four fields separated
// by " | "; blank lines and lines starting with # are skipped. Every entry
// must give its reason.
func parseEntries(r io.Reader, name string) ([]entry, error) {
	var out []entry
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		at := fmt.Sprintf("%s:%d", name, n)
		f := strings.SplitN(line, " | ", 4)
		if len(f) != 4 {
			return nil, fmt.Errorf("%w: %s: want `file | MUTATOR | source line with the token in %s%s | reason`, got %q", errEquivalentFile, at, markOpen, markClose, line)
		}
		e := entry{Path: strings.TrimSpace(f[0]), Type: strings.TrimSpace(f[1]), Line: strings.TrimSpace(f[2]), Reason: strings.TrimSpace(f[3]), At: at, n: n}
		switch {
		case strings.Count(e.Line, markOpen) != 1 || strings.Count(e.Line, markClose) != 1:
			return nil, fmt.Errorf("%w: %s: mark the mutated token once, as %sthis%s", errEquivalentFile, at, markOpen, markClose)
		case e.Reason == "":
			return nil, fmt.Errorf("%w: %s: say why the mutant is equivalent", errEquivalentFile, at)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// markedLine returns the trimmed source line of m with the token at m's
// column wrapped in ⟦ ⟧, reading the file under root.
func markedLine(root string, m mutant, files map[string][]string) (string, error) {
	lines, ok := files[m.Path]
	if !ok {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(m.Path)))
		if err != nil {
			return "", err
		}
		lines = strings.Split(string(b), "\n")
		files[m.Path] = lines
	}
	if m.Line < 1 || m.Line > len(lines) {
		return "", fmt.Errorf("%s: line %d is past the end of the file; is the report from another commit?", m.Path, m.Line)
	}
	return mark(lines[m.Line-1], m.Column)
}

// mark wraps the token starting at byte column col (1-based, as go/token
// counts) of line in ⟦ ⟧ and trims the line.
func mark(line string, col int) (string, error) {
	i := col - 1
	if i < 0 || i >= len(line) {
		return "", fmt.Errorf("column %d is outside the line %q", col, line)
	}
	n := tokenLen(line[i:])
	marked := line[:i] + markOpen + line[i:i+n] + markClose + line[i+n:]
	return strings.TrimSpace(marked), nil
}

// operators are Go's operators and punctuation a mutator can change,
// longest first so the longest match wins.
var operators = []string{
	"&^=", "<<=", ">>=", "...",
	"&&", "||", "<-", "++", "--", "==", "!=", "<=", ">=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<", ">>", "&^", ":=",
}

func tokenLen(s string) int {
	if c := s[0]; c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' { // break, continue
		n := 1
		for n < len(s) && (s[n] == '_' || s[n] >= 'a' && s[n] <= 'z' || s[n] >= 'A' && s[n] <= 'Z' || s[n] >= '0' && s[n] <= '9') {
			n++
		}
		return n
	}
	for _, op := range operators {
		if strings.HasPrefix(s, op) {
			return len(op)
		}
	}
	return 1
}

// matcher consumes entries: each entry accounts for one surviving mutant, so
// two identical lines that both hold an equivalent mutant need two entries.
type matcher struct {
	root    string
	files   map[string][]string
	left    map[string][]entry
	readErr []error
}

func newMatcher(root string, entries []entry) *matcher {
	m := &matcher{root: root, files: map[string][]string{}, left: map[string][]entry{}}
	for _, e := range entries {
		m.left[e.key()] = append(m.left[e.key()], e)
	}
	return m
}

// equivalent reports whether an unconsumed entry names mu, and consumes it.
func (m *matcher) equivalent(mu mutant) bool {
	line, err := markedLine(m.root, mu, m.files)
	if err != nil {
		m.readErr = append(m.readErr, fmt.Errorf("%s: %w", mu, err))
		return false
	}
	k := mu.Path + "|" + mu.Type + "|" + line
	es := m.left[k]
	if len(es) == 0 {
		return false
	}
	m.left[k] = es[1:]
	return true
}

// stale returns the entries under the checked packages' directories that
// matched no surviving mutant: the line changed, or a test now kills the
// mutant. Either way the entry must go.
func (m *matcher) stale(pkgs []string) []entry {
	var out []entry
	for _, es := range m.left {
		for _, e := range es {
			if slices.ContainsFunc(pkgs, func(p string) bool { return strings.HasPrefix(e.Path, p+"/") }) {
				out = append(out, e)
			}
		}
	}
	slices.SortFunc(out, func(a, b entry) int { return a.n - b.n })
	return out
}
