package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMark(t *testing.T) {
	for _, c := range []struct {
		line string
		col  int
		want string
	}{
		{"\tif n > max {", 7, "if n ⟦>⟧ max {"},
		{"\tif n >= max {", 7, "if n ⟦>=⟧ max {"},
		{"\tfor i := 0; i < n; i++ {", 22, "for i := 0; i < n; i⟦++⟧ {"},
		{"\t\tx &^= y", 5, "x ⟦&^=⟧ y"},
		{"\t\tbreak", 3, "⟦break⟧"},
		{"\treturn -n", 9, "return ⟦-⟧n"},
	} {
		got, err := mark(c.line, c.col)
		if err != nil || got != c.want {
			t.Errorf("mark(%q, %d) = %q, %v; want %q", c.line, c.col, got, err, c.want)
		}
	}
	if _, err := mark("x", 5); err == nil {
		t.Error("mark accepted a column past the line")
	}
}

func TestParseEntries(t *testing.T) {
	good := "# comment\n\npkg/a.go | CONDITIONALS_BOUNDARY | if n ⟦>⟧ max { | n never equals max here\n"
	es, err := parseEntries(strings.NewReader(good), "eq.txt")
	if err != nil || len(es) != 1 {
		t.Fatalf("parseEntries = %v, %v", es, err)
	}
	if e := es[0]; e.Path != "pkg/a.go" || e.Type != "CONDITIONALS_BOUNDARY" || e.Line != "if n ⟦>⟧ max {" || e.At != "eq.txt:3" {
		t.Errorf("entry = %+v", e)
	}
	for name, bad := range map[string]string{
		"three fields": "pkg/a.go | CONDITIONALS_BOUNDARY | if n ⟦>⟧ max {\n",
		"no reason":    "pkg/a.go | CONDITIONALS_BOUNDARY | if n ⟦>⟧ max { |  \n",
		"no mark":      "pkg/a.go | CONDITIONALS_BOUNDARY | if n > max { | why\n",
		"two marks":    "pkg/a.go | CONDITIONALS_BOUNDARY | if ⟦n⟧ ⟦>⟧ max { | why\n",
	} {
		if _, err := parseEntries(strings.NewReader(bad), "eq.txt"); !errors.Is(err, errEquivalentFile) || !strings.Contains(err.Error(), "eq.txt:1") {
			t.Errorf("%s: err = %v, want errEquivalentFile at eq.txt:1", name, err)
		}
	}
}

func TestCount(t *testing.T) {
	r, err := readReport("pkg", filepath.Join("testdata", "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	tl, surv := count(r, func(mutant) bool { return false })
	if want := (tally{Killed: 2, Lived: 2, NotCovered: 1, TimedOut: 1}); tl != want {
		t.Fatalf("tally = %+v, want %+v", tl, want)
	}
	if len(surv) != 2 || surv[0].Line != 4 || surv[1].Line != 7 {
		t.Errorf("survivors = %v", surv)
	}
	if e, c := tl.Efficacy(), tl.Coverage(); e != 50 || c != 80 {
		t.Errorf("efficacy, coverage = %v, %v; want 50, 80", e, c)
	}
	tl, _ = count(r, func(m mutant) bool { return m.Line == 4 })
	if e, c := tl.Efficacy(), tl.Coverage(); tl.Equivalent != 1 || e != 100*2.0/3 || c != 80 {
		t.Errorf("with one equivalent: %+v, efficacy %v, coverage %v", tl, e, c)
	}
}

// runCheck runs the command on testdata's report with the given
// equivalent list and thresholds.
func runCheck(t *testing.T, equivalent string, args ...string) (string, error) {
	t.Helper()
	eq := filepath.Join(t.TempDir(), "equivalent.txt")
	if err := os.WriteFile(eq, []byte(equivalent), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	all := append([]string{"-equivalent", eq, "-root", filepath.Join("testdata", "mod")}, args...)
	all = append(all, "pkg="+filepath.Join("testdata", "report.json"))
	err := run(all, &out)
	return out.String(), err
}

func TestRun(t *testing.T) {
	entry := "pkg/a.go | CONDITIONALS_BOUNDARY | if n ⟦>⟧ max { | test fixture\n"
	t.Run("under threshold", func(t *testing.T) {
		out, err := runCheck(t, "", "-efficacy", "60")
		if !errors.Is(err, errThreshold) || !strings.Contains(err.Error(), "pkg: test efficacy 50.0% < 60%") {
			t.Fatalf("err = %v", err)
		}
		if !strings.Contains(out, "pkg/a.go:4 | CONDITIONALS_BOUNDARY | if n ⟦>⟧ max {") {
			t.Errorf("survivor not listed with its marked line:\n%s", out)
		}
	})
	t.Run("one entry excuses one mutant", func(t *testing.T) {
		// The two lines are identical: one entry accounts for one of them only.
		_, err := runCheck(t, entry, "-efficacy", "67", "-coverage", "80")
		if !errors.Is(err, errThreshold) {
			t.Fatalf("err = %v; one entry must not excuse two mutants", err)
		}
		out, err := runCheck(t, entry+entry, "-efficacy", "100", "-coverage", "80")
		if err != nil {
			t.Fatalf("err = %v\n%s", err, out)
		}
		if !strings.Contains(out, "100.0%") {
			t.Errorf("efficacy with both excused is not 100%%:\n%s", out)
		}
	})
	t.Run("stale entry fails", func(t *testing.T) {
		stale := "pkg/a.go | CONDITIONALS_BOUNDARY | if n ⟦>⟧ min { | the line changed\n"
		out, err := runCheck(t, entry+entry+stale, "-efficacy", "0", "-coverage", "0")
		if !errors.Is(err, errThreshold) || !strings.Contains(out, "if n ⟦>⟧ min {") {
			t.Fatalf("err = %v, out:\n%s", err, out)
		}
	})
	t.Run("an equivalent mutant that timed out keeps its entry", func(t *testing.T) {
		timed := "pkg/a.go | ARITHMETIC_BASE | return n ⟦+⟧ 0 | changes timing only\n"
		out, err := runCheck(t, entry+entry+timed, "-efficacy", "100", "-coverage", "80")
		if err != nil || strings.Contains(out, "stale") {
			t.Fatalf("err = %v, out:\n%s", err, out)
		}
	})
	t.Run("other packages' entries are not stale", func(t *testing.T) {
		other := "other/b.go | CONDITIONALS_BOUNDARY | if n ⟦>⟧ min { | not checked in this run\n"
		if out, err := runCheck(t, other, "-efficacy", "0", "-coverage", "0"); err != nil {
			t.Fatalf("err = %v\n%s", err, out)
		}
	})
	t.Run("coverage", func(t *testing.T) {
		if _, err := runCheck(t, "", "-efficacy", "0", "-coverage", "81"); !errors.Is(err, errThreshold) {
			t.Fatalf("coverage 80%% passed a threshold of 81%%: %v", err)
		}
	})
}

// TestShards: a package's shard reports add up to the package's, and two
// shards that mutated the same line are refused (shards.txt must give
// each file to one shard).
func TestShards(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	eq := write("equivalent.txt", "")
	// The fixture's report cut in two: a.go's first three mutants in one
	// shard, the rest in another.
	one := write("one.json", `{"files":[{"file_name":"a.go","mutations":[
{"type":"CONDITIONALS_BOUNDARY","status":"LIVED","line":4,"column":7},
{"type":"CONDITIONALS_BOUNDARY","status":"LIVED","line":7,"column":7},
{"type":"CONDITIONALS_NEGATION","status":"KILLED","line":4,"column":7}]}],"elapsed_time":2}`)
	two := write("two.json", `{"files":[{"file_name":"a.go","mutations":[
{"type":"CONDITIONALS_NEGATION","status":"KILLED","line":7,"column":7},
{"type":"ARITHMETIC_BASE","status":"NOT COVERED","line":10,"column":11},
{"type":"ARITHMETIC_BASE","status":"TIMED OUT","line":10,"column":11}]}],"elapsed_time":3}`)
	root := filepath.Join("testdata", "mod")
	var whole, split bytes.Buffer
	if err := run([]string{"-equivalent", eq, "-root", root, "-efficacy", "0", "-coverage", "0", "pkg=" + filepath.Join("testdata", "report.json")}, &whole); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"-equivalent", eq, "-root", root, "-efficacy", "0", "-coverage", "0", "pkg=" + one, "pkg=" + two}, &split); err != nil {
		t.Fatal(err)
	}
	// The same table but for the time column (2 s + 3 s, not 12.5 s).
	wantRow := strings.Replace(strings.Split(whole.String(), "\n")[1], "    12s", "     5s", 1)
	if got := strings.Split(split.String(), "\n")[1]; got != wantRow {
		t.Errorf("shards add up to\n%s\nwant\n%s", got, wantRow)
	}
	if !strings.Contains(split.String(), "pkg/a.go:4 |") || !strings.Contains(split.String(), "pkg/a.go:7 |") {
		t.Errorf("survivors of both shards not listed:\n%s", split.String())
	}
	var out bytes.Buffer
	err := run([]string{"-equivalent", eq, "-root", root, "pkg=" + one, "pkg=" + one}, &out)
	if err == nil || !strings.Contains(err.Error(), "in two shards") {
		t.Errorf("the same mutants in two shards: err = %v", err)
	}
}

// TestCompare: a spot check agrees with the record when each mutant it ran
// has the recorded outcome (a timeout is a kill; a recorded survivor that
// is killed now is fine), and disagrees on a recorded kill that lives, a
// mutant the record lacks, or a changed coverage.
func TestCompare(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		f, err := os.CreateTemp(dir, "*.json")
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(`{"files":[{"file_name":"a.go","mutations":[` + body + `]}],"elapsed_time":1}`)
		f.Close()
		return f.Name()
	}
	rec := "pkg=" + filepath.Join("testdata", "report.json")
	for _, c := range []struct {
		name, fresh string
		ok          bool
	}{
		{"same", `{"type":"CONDITIONALS_NEGATION","status":"KILLED","line":4,"column":7},{"type":"CONDITIONALS_BOUNDARY","status":"LIVED","line":7,"column":7}`, true},
		{"timed out is killed", `{"type":"CONDITIONALS_NEGATION","status":"TIMED OUT","line":4,"column":7},{"type":"ARITHMETIC_BASE","status":"KILLED","line":10,"column":11}`, true},
		{"a survivor killed now", `{"type":"CONDITIONALS_BOUNDARY","status":"KILLED","line":4,"column":7}`, true},
		{"a kill that lives", `{"type":"CONDITIONALS_NEGATION","status":"LIVED","line":7,"column":7}`, false},
		{"not in the record", `{"type":"INVERT_NEGATIVES","status":"KILLED","line":4,"column":7}`, false},
		{"coverage differs", `{"type":"ARITHMETIC_BASE","status":"KILLED","line":10,"column":11},{"type":"CONDITIONALS_NEGATION","status":"NOT COVERED","line":4,"column":7}`, false},
		{"nothing run", ``, false},
	} {
		var out bytes.Buffer
		err := run([]string{"-compare", write(c.fresh), rec}, &out)
		if c.ok != (err == nil) || (err != nil && !errors.Is(err, errRecord)) {
			t.Errorf("%s: err = %v\n%s", c.name, err, out.String())
		}
	}
	if err := run([]string{"-compare", write(""), "pkg=" + filepath.Join("testdata", "report.json"), "other=x.json"}, io.Discard); err == nil {
		t.Error("-compare accepted reports of two packages")
	}
}

// TestFiles: -files lists the files with mutants a test ran.
func TestFiles(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-files", "pkg=" + filepath.Join("testdata", "report.json")}, &out); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "a.go 5\n" {
		t.Errorf("-files = %q, want %q", got, "a.go 5\n")
	}
}
