package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTimeline(t *testing.T) {
	f := newFixture(t)
	out := filepath.Join(t.TempDir(), "timeline.html")
	r := runCLI(t, "timeline", "last", "--journal", f.path, "-o", out)
	if r.err != nil {
		t.Fatalf("%v\n%s", r.err, r.stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, want := range []string{"<!DOCTYPE html>", "session " + f.live.String(), `<td class="srv">github</td>`, "Read from " + f.path} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if !strings.Contains(r.stderr, "wrote "+out) {
		t.Errorf("stderr = %q", r.stderr)
	}
	if matches, _ := filepath.Glob(filepath.Join(filepath.Dir(out), ".timeline.html.*")); len(matches) > 0 {
		t.Errorf("temporary files left behind: %v", matches)
	}

	// Flags first, a prefix, and standard output.
	r = runCLI(t, "timeline", "--journal", f.path, "-o", "-", f.stopped.String()[:13])
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !strings.Contains(r.stdout, "session "+f.stopped.String()) || !strings.Contains(r.stdout, "</html>") {
		t.Errorf("stdout is not the stopped session's page: %.200s", r.stdout)
	}
}

func TestTimelineErrors(t *testing.T) {
	f := newFixture(t)
	out := filepath.Join(t.TempDir(), "t.html")
	for _, c := range []struct {
		args  []string
		want  string
		usage bool
	}{
		{[]string{"timeline", "--journal", f.path, "-o", out}, "name the session", true},
		{[]string{"timeline", "last", "--journal", f.path}, "-o FILE is required", true},
		{[]string{"timeline", "last", "extra", "--journal", f.path, "-o", out}, `unexpected argument "extra"`, true},
		{[]string{"timeline", "last", "--journal", f.path, "-o", out, "--width", "-5"}, "--width must be positive", true},
		{[]string{"timeline", "ffff0000", "--journal", f.path, "-o", out}, "no session starts with", false},
		{[]string{"timeline", "last", "--journal", filepath.Join(t.TempDir(), "none.db"), "-o", out}, "no journal at", false},
		{[]string{"timeline", "last", "--journal", f.path, "-o", filepath.Join(t.TempDir(), "missing", "dir", "t.html")}, "no such file", false},
	} {
		r := runCLI(t, c.args...)
		if r.err == nil || !strings.Contains(r.err.Error(), c.want) {
			t.Errorf("%q: err = %v, want %q", c.args[1:], r.err, c.want)
			continue
		}
		if got := exitCode(r.err) == 2; got != c.usage {
			t.Errorf("%q: exit %d", c.args[1:], exitCode(r.err))
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a failed run wrote the page")
	}
}

func TestTimelineInHelp(t *testing.T) {
	r := runCLI(t, "help")
	commands, notYet, _ := strings.Cut(r.stdout, "Not in this build yet:")
	if !strings.Contains(commands, "timeline SESSION -o FILE") || strings.Contains(notYet, "timeline") {
		t.Errorf("help should list timeline among the commands:\n%s", r.stdout)
	}
}
