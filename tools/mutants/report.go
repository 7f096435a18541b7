package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// The statuses gremlins v0.6.0 writes in its JSON report.
const (
	statusKilled     = "KILLED"
	statusLived      = "LIVED"
	statusNotCovered = "NOT COVERED"
	statusTimedOut   = "TIMED OUT"
	statusNotViable  = "NOT VIABLE"
)

// gremlinsReport is the part of gremlins' `-o` output this command reads.
type gremlinsReport struct {
	Files []struct {
		FileName  string `json:"file_name"`
		Mutations []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
			Line   int    `json:"line"`
			Column int    `json:"column"`
		} `json:"mutations"`
	} `json:"files"`
	ElapsedTime float64 `json:"elapsed_time"`
}

// mutant is one mutation of one package, with its path from the module root.
type mutant struct {
	Path   string // e.g. store/journal.go
	Line   int
	Column int
	Type   string // e.g. CONDITIONALS_BOUNDARY
	Status string
}

func (m mutant) String() string {
	return fmt.Sprintf("%s:%d:%d %s", m.Path, m.Line, m.Column, m.Type)
}

// pkgReport is one package's mutants as gremlins reported them.
type pkgReport struct {
	Pkg     string
	Mutants []mutant
	Seconds float64
}

// readReport reads gremlins' JSON report for the package in directory pkg
// (relative to the module root; gremlins names files relative to it).
func readReport(pkg, path string) (pkgReport, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return pkgReport{}, fmt.Errorf("report of %s: %w", pkg, err)
	}
	var r gremlinsReport
	if err := json.Unmarshal(b, &r); err != nil {
		return pkgReport{}, fmt.Errorf("report of %s: %s is not a gremlins JSON report: %w", pkg, path, err)
	}
	out := pkgReport{Pkg: pkg, Seconds: r.ElapsedTime}
	for _, f := range r.Files {
		for _, m := range f.Mutations {
			out.Mutants = append(out.Mutants, mutant{
				Path: filepath.ToSlash(filepath.Join(pkg, f.FileName)), Line: m.Line, Column: m.Column,
				Type: m.Type, Status: m.Status,
			})
		}
	}
	sortMutants(out.Mutants)
	return out, nil
}

// add merges o, another shard's report of the same package, into r. A
// mutant both report is an error: two shards mutated the same file.
func (r *pkgReport) add(o pkgReport) error {
	seen := make(map[string]bool, len(r.Mutants))
	for _, m := range r.Mutants {
		seen[m.String()] = true
	}
	for _, m := range o.Mutants {
		if seen[m.String()] {
			return fmt.Errorf("mutant %s is in two shards of %s", m, r.Pkg)
		}
	}
	r.Mutants = append(r.Mutants, o.Mutants...)
	sortMutants(r.Mutants)
	r.Seconds += o.Seconds
	return nil
}

func sortMutants(ms []mutant) {
	sort.Slice(ms, func(i, j int) bool {
		a, b := ms[i], ms[j]
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Column != b.Column {
			return a.Column < b.Column
		}
		return a.Type < b.Type
	})
}

// tally is a package's counts once equivalent mutants are taken away.
type tally struct {
	Killed, Lived, Equivalent, NotCovered, TimedOut, NotViable int
}

// Efficacy is the share of covered, non-equivalent mutants the tests kill,
// as gremlins computes it: killed / (killed + lived), in percent.
func (t tally) Efficacy() float64 {
	if t.Killed+t.Lived == 0 {
		return 0
	}
	return 100 * float64(t.Killed) / float64(t.Killed+t.Lived)
}

// Coverage is the share of mutants that some test of the package runs:
// (killed + lived + equivalent) / (those + not covered), in percent. An
// equivalent mutant is covered: a test ran it and it survived.
func (t tally) Coverage() float64 {
	run := t.Killed + t.Lived + t.Equivalent
	if run+t.NotCovered == 0 {
		return 0
	}
	return 100 * float64(run) / float64(run+t.NotCovered)
}

// count tallies r's mutants. A lived mutant for which isEquivalent is true
// counts as equivalent, not lived; survivors lists the others.
func count(r pkgReport, isEquivalent func(mutant) bool) (t tally, survivors []mutant) {
	for _, m := range r.Mutants {
		switch m.Status {
		case statusKilled:
			t.Killed++
		case statusLived:
			if isEquivalent(m) {
				t.Equivalent++
				continue
			}
			t.Lived++
			survivors = append(survivors, m)
		case statusNotCovered:
			t.NotCovered++
		case statusTimedOut:
			// Killed, as far as efficacy goes. An equivalent mutant that
			// changes timing can time out on a loaded machine: its entry
			// is still in use, not stale.
			t.TimedOut++
			isEquivalent(m)
		case statusNotViable:
			t.NotViable++
		}
	}
	return t, survivors
}
