package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

var errThreshold = errors.New("mutants: thresholds not met")

func run(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("mutants", flag.ContinueOnError)
	equivalentFile := fs.String("equivalent", "tools/mutants/equivalent.txt", "the checked-in list of equivalent mutants")
	root := fs.String("root", ".", "the module root the reports' files are relative to")
	minEfficacy := fs.Float64("efficacy", 95, "least test efficacy per package, in percent")
	minCoverage := fs.Float64("coverage", 90, "least mutator coverage per package, in percent")
	files := fs.Bool("files", false, "list the files of the reports given as PKG=REPORT.json that have mutants a test ran, as \"FILE COUNT\" lines (FILE relative to the package)")
	spot := fs.String("compare", "", "a fresh `REPORT.json` of some of one package's mutants, to check against the package's reports given as PKG=REPORT.json")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: mutants [flags] PKG=REPORT.json ...\n       mutants -compare FRESH.json PKG=RECORDED.json ...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errors.New("mutants: name at least one PKG=REPORT.json")
	}
	if *files {
		return runFiles(w, fs.Args())
	}
	if *spot != "" {
		return runCompare(w, *spot, fs.Args())
	}
	f, err := os.Open(*equivalentFile)
	if err != nil {
		return fmt.Errorf("mutants: %w", err)
	}
	entries, err := parseEntries(f, *equivalentFile)
	f.Close()
	if err != nil {
		return err
	}
	m := newMatcher(*root, entries)

	var reports []pkgReport
	for _, a := range fs.Args() {
		pkg, path, ok := strings.Cut(a, "=")
		if !ok || pkg == "" || path == "" {
			return fmt.Errorf("mutants: %q: want PKG=REPORT.json, e.g. store=/tmp/store.json", a)
		}
		r, err := readReport(strings.TrimSuffix(pkg, "/"), path)
		if err != nil {
			return err
		}
		// A package cut into shards (.ci/mutation, shards.txt) comes as
		// one report per shard: they add up to the package's.
		if i := slices.IndexFunc(reports, func(o pkgReport) bool { return o.Pkg == r.Pkg }); i >= 0 {
			if err := reports[i].add(r); err != nil {
				return fmt.Errorf("mutants: %s: %w", path, err)
			}
			continue
		}
		reports = append(reports, r)
	}

	var failed []string
	var pkgs []string
	fmt.Fprintf(w, "%-12s %7s %6s %6s %8s %6s %6s %9s %9s %7s\n", "package", "killed", "lived", "equiv", "not-cov", "t/out", "n/via", "efficacy", "coverage", "time")
	var survivors []mutant
	for _, r := range reports {
		pkgs = append(pkgs, r.Pkg)
		t, s := count(r, m.equivalent)
		survivors = append(survivors, s...)
		fmt.Fprintf(w, "%-12s %7d %6d %6d %8d %6d %6d %8.1f%% %8.1f%% %6.0fs\n", r.Pkg, t.Killed, t.Lived, t.Equivalent, t.NotCovered, t.TimedOut, t.NotViable, t.Efficacy(), t.Coverage(), r.Seconds)
		if t.Efficacy() < *minEfficacy {
			failed = append(failed, fmt.Sprintf("%s: test efficacy %.1f%% < %.0f%%", r.Pkg, t.Efficacy(), *minEfficacy))
		}
		if t.Coverage() < *minCoverage {
			failed = append(failed, fmt.Sprintf("%s: mutator coverage %.1f%% < %.0f%%", r.Pkg, t.Coverage(), *minCoverage))
		}
	}
	if len(m.readErr) > 0 {
		return fmt.Errorf("mutants: reading the mutated lines: %w", errors.Join(m.readErr...))
	}
	if len(survivors) > 0 {
		fmt.Fprintf(w, "\nsurvivors (a test should kill each; if none can, list it in %s with the reason):\n", *equivalentFile)
		for _, s := range survivors {
			line, _ := markedLine(*root, s, m.files)
			fmt.Fprintf(w, "  %s | %s | %s\n", s.Path+fmt.Sprintf(":%d", s.Line), s.Type, line)
		}
	}
	if st := m.stale(pkgs); len(st) > 0 {
		fmt.Fprintf(w, "\nstale entries of %s (no surviving mutant matches; remove them):\n", *equivalentFile)
		for _, e := range st {
			fmt.Fprintf(w, "  %s: %s | %s | %s\n", e.At, e.Path, e.Type, e.Line)
		}
		failed = append(failed, fmt.Sprintf("%d stale entries in %s", len(st), *equivalentFile))
	}
	if len(failed) > 0 {
		return fmt.Errorf("%w:\n  %s", errThreshold, strings.Join(failed, "\n  "))
	}
	fmt.Fprintf(w, "\nall packages meet efficacy >= %.0f%% and coverage >= %.0f%%\n", *minEfficacy, *minCoverage)
	return nil
}

// runCompare reads the recorded reports (PKG=REPORT.json, one package)
// and checks the fresh one against them.
func runCompare(w io.Writer, fresh string, args []string) error {
	var recorded []pkgReport
	pkg := ""
	for _, a := range args {
		p, path, ok := strings.Cut(a, "=")
		if !ok || p == "" || path == "" || (pkg != "" && p != pkg) {
			return fmt.Errorf("mutants: -compare: %q: want PKG=REPORT.json, one package", a)
		}
		pkg = strings.TrimSuffix(p, "/")
		r, err := readReport(pkg, path)
		if err != nil {
			return err
		}
		recorded = append(recorded, r)
	}
	if pkg == "" {
		return errors.New("mutants: -compare: name the recorded reports as PKG=REPORT.json")
	}
	f, err := readReport(pkg, fresh)
	if err != nil {
		return err
	}
	return compare(w, f, recorded)
}

// runFiles lists the files of the reports with covered mutants and how
// many: .ci/mutation picks the file of a spot check among them.
func runFiles(w io.Writer, args []string) error {
	n := map[string]int{}
	var order []string
	for _, a := range args {
		p, path, ok := strings.Cut(a, "=")
		if !ok || p == "" || path == "" {
			return fmt.Errorf("mutants: -files: %q: want PKG=REPORT.json", a)
		}
		r, err := readReport(strings.TrimSuffix(p, "/"), path)
		if err != nil {
			return err
		}
		for _, m := range r.Mutants {
			if m.Status == statusNotCovered || m.Status == statusNotViable {
				continue
			}
			f := strings.TrimPrefix(m.Path, r.Pkg+"/")
			if n[f] == 0 {
				order = append(order, f)
			}
			n[f]++
		}
	}
	slices.Sort(order)
	for _, f := range order {
		fmt.Fprintf(w, "%s %d\n", f, n[f])
	}
	return nil
}
