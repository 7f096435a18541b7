package main

import (
	"errors"
	"fmt"
	"io"
)

// errRecord is returned when a fresh run of some mutants contradicts the
// recorded run of their package.
var errRecord = errors.New("mutants: the recorded run disagrees with a fresh run")

// compare checks a fresh run of some of a package's mutants (a spot check:
// .ci/mutation re-runs one file of a package whose recorded reports it
// reuses) against the recorded reports: each mutant of fresh must be in
// the record with the same outcome. Killed and timed out are one outcome
// (a timeout depends on the machine's load), and a mutant the record has
// as lived that a test kills now is fine (the tests got better; the
// record undercounts). Anything else fails: a recorded kill that lives,
// a mutant the record lacks, a coverage that differs.
func compare(w io.Writer, fresh pkgReport, recorded []pkgReport) error {
	rec := map[string]string{}
	for _, r := range recorded {
		for _, m := range r.Mutants {
			rec[m.String()] = m.Status
		}
	}
	outcome := func(s string) string {
		if s == statusTimedOut {
			return statusKilled
		}
		return s
	}
	var bad []string
	for _, m := range fresh.Mutants {
		was, ok := rec[m.String()]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("%s: not in the record", m))
		case outcome(was) == outcome(m.Status):
		case was == statusLived && outcome(m.Status) == statusKilled:
		default:
			bad = append(bad, fmt.Sprintf("%s: recorded %s, now %s", m, was, m.Status))
		}
	}
	fmt.Fprintf(w, "spot check of %s: %d mutants run again, %d disagree with the record\n", fresh.Pkg, len(fresh.Mutants), len(bad))
	if len(fresh.Mutants) == 0 {
		return fmt.Errorf("%w: the spot check of %s ran no mutant", errRecord, fresh.Pkg)
	}
	if len(bad) > 0 {
		for _, b := range bad {
			fmt.Fprintln(w, "  "+b)
		}
		return fmt.Errorf("%w: %d of %d mutants of %s; record the package again (MUTATION_RECORD=1 .ci/mutation %s)",
			errRecord, len(bad), len(fresh.Mutants), fresh.Pkg, fresh.Pkg)
	}
	return nil
}
