package main

// The README's "Install" and "First five minutes", walked as written: the
// commands are read from the README's ```sh install and ```sh
// first-five-minutes blocks (so the README and this test cannot drift
// apart) and run, in order: go install into a temporary GOBIN, then the
// installed binary as `mcpledger`, in a temporary HOME, against the real
// npm servers the README names (the copies .ci/peers.sh pins; npx finds
// them offline).

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// readmeTags are the info strings of the README blocks the walk runs.
var readmeTags = []string{"sh install", "sh first-five-minutes"}

// readmeStep is one line of a walked block: a command (args; args[0] is
// "mcpledger", or "go" for go install) or the "Ctrl-C" comment that stops
// `run`.
type readmeStep struct {
	line   int    // in README.md
	text   string // the command as written, without a trailing comment
	args   []string
	ctrlC  bool
	detach bool // `mcpledger run` without --once: stays in the foreground
}

// readmeSteps reads the steps of every block tagged with one of tags in
// the README's text, in order. A comment line that mentions Ctrl-C is a
// step (stop `run` as Ctrl-C does); other comments and blank lines are
// not. A command must be mcpledger's (or go install) and use only words
// and single quotes: the walk runs it without a shell.
func readmeSteps(readme string, tags ...string) ([]readmeStep, error) {
	var steps []readmeStep
	in := false
	sc := bufio.NewScanner(strings.NewReader(readme))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case !in:
			in = strings.HasPrefix(line, "```") && slices.Contains(tags, line[3:])
			continue
		case line == "```":
			in = false
			continue
		case line == "":
			continue
		case strings.HasPrefix(line, "#"):
			if strings.Contains(line, "Ctrl-C") {
				steps = append(steps, readmeStep{line: n, text: line, ctrlC: true})
			}
			continue
		}
		args, text, err := readmeWords(line)
		if err != nil {
			return nil, fmt.Errorf("README.md:%d: %w", n, err)
		}
		if len(args) == 0 || args[0] != "mcpledger" && !(len(args) >= 2 && args[0] == "go" && args[1] == "install") {
			return nil, fmt.Errorf("README.md:%d: %q: only mcpledger commands and go install can be walked", n, line)
		}
		detach := len(args) >= 2 && args[1] == "run" && !slices.Contains(args, "--once")
		steps = append(steps, readmeStep{line: n, text: text, args: args, detach: detach})
	}
	if in {
		return nil, fmt.Errorf("README.md: a %q block is not closed", tags)
	}
	if len(steps) == 0 {
		return nil, fmt.Errorf("README.md has no %q block", tags)
	}
	return steps, nil
}

// readmeWords splits a command line as sh does for plain words and
// '...' quotes, drops a trailing # comment, and returns the words and
// the command without the comment. Anything else sh would interpret
// ($, ", \, `, |, ;, &, <, >, *, ?) is refused.
func readmeWords(line string) (words []string, text string, err error) {
	var cur strings.Builder
	inWord, quoted := false, false
	end := len(line)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quoted:
			if c == '\'' {
				quoted = false
			} else {
				cur.WriteByte(c)
			}
		case c == '\'':
			quoted, inWord = true, true
		case c == ' ' || c == '\t':
			if inWord {
				words, inWord = append(words, cur.String()), false
				cur.Reset()
			}
		case c == '#' && !inWord:
			end = i
			i = len(line)
		case strings.IndexByte("$\"\\`|;&<>*?", c) >= 0:
			return nil, "", fmt.Errorf("%q: %q needs a shell; the walk runs commands without one", line, c)
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if quoted {
		return nil, "", fmt.Errorf("%q: unterminated quote", line)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, strings.TrimSpace(line[:end]), nil
}

// readmeCheck is what the walk checks of one step. Output is compared
// with runs of spaces collapsed (tables align with spaces); {ws} and
// {home} stand for the workspace and HOME.
type readmeCheck struct {
	cmd    string   // the step as the README writes it
	want   []string // in its stdout+stderr (for run: its stderr so far)
	absent []string // not in it
	ready  []string // after the step, wait until these servers are ready
}

// readmeChecks are the README's install and first-five-minutes steps in
// order, each
// with what the README says it prints. A step added, removed or changed
// in the README fails TestReadmeSteps until it is added here.
var readmeChecks = []readmeCheck{
	{cmd: "go install ./cmd/mcpledger"},
	{cmd: "mcpledger version",
		want: []string{"mcpledger ", ", go1."}},
	{cmd: "mcpledger add everything -- npx -y @modelcontextprotocol/server-everything",
		want:   []string{`added server "everything" (local scope) in {home}/.claude/.claude.json ("projects" → "{ws}" → "mcpServers")`},
		absent: []string{"next:"}},
	{cmd: "mcpledger add --scope project files -- npx -y @modelcontextprotocol/server-filesystem .",
		want: []string{`added server "files" (project scope) in {ws}/.mcp.json`,
			"next: mcpledger trust {ws} (a workspace's stdio servers spawn only in a trusted workspace)",
			"next: mcpledger approve files (a project server runs once approved)"}},
	{cmd: "mcpledger run",
		want: []string{"everything ready 13 tools", "files stopped (untrusted)",
			"next: mcpledger approve --trust files\n",
			"(trusts {ws} and approves files as configured now; in two steps: mcpledger trust {ws}; mcpledger approve files)"}},
	{cmd: "mcpledger status",
		want: []string{"(running)", "SERVER STATE REASON TRANSPORT TOOLS ATTEMPT SINCE ERROR",
			"everything ready - stdio 13 1", "files stopped untrusted stdio 0 0", "next: mcpledger approve --trust files\n"}},
	{cmd: "mcpledger why mcp__files__list_directory",
		want: []string{"mcp__files__list_directory was NOT in the catalog after seq",
			"- server files was stopped (untrusted)",
			"- admission refused it: untrusted (stdio server from untrusted workspace {ws})",
			"recovery: the workspace {ws} is not trusted: mcpledger approve --trust files (trusts it and approves files)"}},
	{cmd: "mcpledger approve --trust files",
		want:  []string{"files: approved by", "(the running mcpledger acted on it)", "trusted {ws} ({home}/.config/mcpledger/config.json)"},
		ready: []string{"files"}},
	{cmd: "mcpledger status",
		want:   []string{"(running)", "everything ready - stdio 13 1", "files ready - stdio 14 1"},
		absent: []string{"next:"}},
	{cmd: "mcpledger tools",
		want: []string{"mcp__everything__get-sum Returns the sum of two numbers",
			"mcp__files__list_directory Get a detailed listing"}},
	{cmd: `mcpledger call mcp__everything__get-sum --args '{"a":2,"b":3}'`,
		want: []string{"The sum of 2 and 3 is 5.\n"}},
	{cmd: `mcpledger call mcp__files__list_directory --args '{"path":"."}'`,
		want: []string{"[FILE] .mcp.json\n"}},
	{cmd: "# after Ctrl-C in the first terminal:",
		want: []string{"files ready 14 tools", "stopping: every server is being shut down"}},
	{cmd: "mcpledger timeline last -o timeline.html",
		want: []string{"wrote timeline.html: session "}},
	{cmd: "mcpledger sessions",
		want: []string{"run", "everything,files stopped (shutdown)"}},
}

func readReadme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReadmeSteps: the README's first-five-minutes blocks parse, run only
// mcpledger commands (one `run` in the foreground, stopped by a Ctrl-C
// step after it), and are exactly the steps readmeChecks checks, in
// order. It needs neither node nor the binary, so it holds under -short:
// an edit to the README's commands fails here until the walk checks it.
func TestReadmeSteps(t *testing.T) {
	steps, err := readmeSteps(readReadme(t), readmeTags...)
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, s := range steps {
		got = append(got, s.text)
	}
	for _, c := range readmeChecks {
		want = append(want, c.cmd)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the README's install and first-five-minutes steps:\n%s\n\nreadmeChecks (update it with the README):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	running := false
	for _, s := range steps {
		switch {
		case s.detach && running:
			t.Errorf("README.md:%d: a second run while one runs", s.line)
		case s.detach:
			running = true
		case s.ctrlC && !running:
			t.Errorf("README.md:%d: Ctrl-C with no run to stop", s.line)
		case s.ctrlC:
			running = false
		}
	}
	if running {
		t.Errorf("the README leaves run running: add a step with a Ctrl-C comment")
	}
}

// TestReadmeWords pins what the walk runs for each way a README line can
// be written, and what it refuses to run without a shell.
func TestReadmeWords(t *testing.T) {
	for _, tc := range []struct {
		line, text string
		words      []string
	}{
		{"mcpledger status", "mcpledger status", []string{"mcpledger", "status"}},
		{"mcpledger  run   # Ctrl-C stops it", "mcpledger  run", []string{"mcpledger", "run"}},
		{`mcpledger call t --args '{"a":2, "b":"# x"}'`, `mcpledger call t --args '{"a":2, "b":"# x"}'`, []string{"mcpledger", "call", "t", "--args", `{"a":2, "b":"# x"}`}},
		{"mcpledger add x -- npx -y pkg .", "mcpledger add x -- npx -y pkg .", []string{"mcpledger", "add", "x", "--", "npx", "-y", "pkg", "."}},
		{"mcpledger why a#b", "mcpledger why a#b", []string{"mcpledger", "why", "a#b"}},
		{"mcpledger x ''", "mcpledger x ''", []string{"mcpledger", "x", ""}},
	} {
		words, text, err := readmeWords(tc.line)
		if err != nil || text != tc.text || strings.Join(words, "|") != strings.Join(tc.words, "|") || len(words) != len(tc.words) {
			t.Errorf("readmeWords(%q) = %q, %q, %v; want %q, %q", tc.line, words, text, err, tc.words, tc.text)
		}
	}
	for _, line := range []string{`mcpledger call t --args "{}"`, "mcpledger x $HOME", "mcpledger tools | head", "mcpledger x 'open", "mcpledger a; rm x", "mcpledger x > f"} {
		if _, _, err := readmeWords(line); err == nil {
			t.Errorf("readmeWords(%q): no error; the walk would run it differently from a shell", line)
		}
	}
	tag := readmeTags[1]
	for _, readme := range []string{"```" + tag + "\nls -l\n```\n", "```" + tag + "\nmcpledger status\n", "```" + tag + "\ngo build\n```\n", "no block\n"} {
		if _, err := readmeSteps(readme, readmeTags...); err == nil {
			t.Errorf("readmeSteps(%q): no error", readme)
		}
	}
}

// readmeOutputTag marks the README's blocks of what the steps print.
const readmeOutputTag = "text first-five-minutes"

// readmeShown is one line of output the README shows, as a pattern.
type readmeShown struct {
	line int
	text string
	re   *regexp.Regexp
}

// readmeValue is what varies from one run to the next in a line the README
// shows: a number, a duration, a session ID, a seq, a count.
var readmeValue = regexp.MustCompile(`[0-9][0-9a-f.:-]*(ms|s)?`)

// readmeShownLines reads the lines of the README's output blocks (a line
// "$ COMMAND" is the command, not output) and turns each into a pattern
// of a whole output line: the README's example project directory stands
// for the workspace, each value (readmeValue) for any value, and runs of
// spaces for any run of spaces.
func readmeShownLines(readme, exampleDir, ws string) ([]readmeShown, error) {
	var shown []readmeShown
	in := false
	sc := bufio.NewScanner(strings.NewReader(readme))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), " ")
		switch {
		case !in:
			in = line == "```"+readmeOutputTag
			continue
		case line == "```":
			in = false
			continue
		case line == "" || strings.HasPrefix(line, "$ "):
			continue
		}
		var re strings.Builder
		re.WriteString("^")
		last := 0
		for _, m := range readmeValue.FindAllStringIndex(line, -1) {
			re.WriteString(regexp.QuoteMeta(line[last:m[0]]))
			re.WriteString(readmeValue.String())
			last = m[1]
		}
		re.WriteString(regexp.QuoteMeta(line[last:]) + "$")
		p := strings.ReplaceAll(re.String(), regexp.QuoteMeta(exampleDir), regexp.QuoteMeta(ws))
		p = readmeSpaces.ReplaceAllString(p, " +")
		r, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("README.md:%d: %w", n, err)
		}
		shown = append(shown, readmeShown{line: n, text: line, re: r})
	}
	if len(shown) == 0 {
		return nil, fmt.Errorf("README.md has no %q block", readmeOutputTag)
	}
	return shown, nil
}

// readmeExampleDir is the project directory of the README's examples.
const readmeExampleDir = "/home/me/src/project"

// readmeSqueeze collapses runs of spaces, so that a check does not depend
// on how a table aligns its columns.
var readmeSpaces = regexp.MustCompile(` +`)

func readmeSqueeze(s string) string { return readmeSpaces.ReplaceAllString(s, " ") }

// TestReadmeFirstFiveMinutes walks the README's install and first five
// minutes, as written, the way a newcomer does. `go install` (from the
// repository's root, into a new GOBIN, with the developer's Go settings
// and caches) installs the `mcpledger` the next steps run from PATH.
// HOME, XDG_CONFIG_HOME, XDG_STATE_HOME and CLAUDE_CONFIG_DIR are new and
// empty (so are the journal, the user config and ~/.claude.json), and the
// commands run in a new project directory. `run` stays in the foreground
// of "the first terminal" until the Ctrl-C step sends it SIGINT. The
// servers are the ones the README names, started by `npx -y` as written:
// the project's parent holds the pinned peers' node_modules, so npx finds
// them there, offline (npm_config_offline: npx never downloads, and fails
// rather than try). Each step's key output lines are checked
// (readmeChecks), and so is the timeline page it writes.
func TestReadmeFirstFiveMinutes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs the README's servers")
	}
	steps, err := readmeSteps(readReadme(t), readmeTags...)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != len(readmeChecks) {
		t.Fatalf("README and readmeChecks differ (TestReadmeSteps says how)")
	}
	npx, err := exec.LookPath("npx")
	if err != nil {
		t.Skip("npx not found: the README's servers run with npx (Node.js)")
	}
	peers := peersDir(t,
		"node_modules/@modelcontextprotocol/server-everything/package.json",
		"node_modules/@modelcontextprotocol/server-filesystem/package.json")

	dir := t.TempDir()
	binDir := filepath.Join(dir, "bin")
	if err := os.Mkdir(binDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(peers, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(dir, "project")
	home := filepath.Join(dir, "home")
	for _, d := range []string{ws, home} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if ws, err = filepath.EvalSymlinks(ws); err != nil {
		t.Fatal(err)
	}
	if home, err = filepath.EvalSymlinks(home); err != nil {
		t.Fatal(err)
	}
	// A newcomer's environment: nothing of mcpledger's, the developer's
	// or npm's settings; the test's own HOME; npx never downloads.
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "HOME" || k == "PATH" || k == "CLAUDE_CONFIG_DIR" || strings.HasPrefix(k, "XDG_") ||
			strings.HasPrefix(k, "MCPLEDGER_") || strings.HasPrefix(strings.ToLower(k), "npm_") || k == "NO_COLOR" {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "HOME="+home,
		"XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"XDG_STATE_HOME="+filepath.Join(home, ".local", "state"),
		"CLAUDE_CONFIG_DIR="+filepath.Join(home, ".claude"),
		"PATH="+binDir+string(os.PathListSeparator)+filepath.Dir(npx)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"npm_config_offline=true", "npm_config_update_notifier=false")
	expand := strings.NewReplacer("{ws}", ws, "{home}", home).Replace

	bin := filepath.Join(binDir, "mcpledger")
	command := func(ctx context.Context, args []string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, bin, args[1:]...)
		cmd.Dir, cmd.Env, cmd.WaitDelay = ws, env, 10*time.Second
		return cmd
	}
	var printed []string // every line the steps printed
	check := func(s readmeStep, c readmeCheck, out string) {
		t.Helper()
		for _, l := range strings.Split(out, "\n") {
			printed = append(printed, strings.TrimRight(l, " "))
		}
		got := readmeSqueeze(out)
		for _, w := range c.want {
			if !strings.Contains(got, readmeSqueeze(expand(w))) {
				t.Errorf("README.md:%d %s: the output lacks %q:\n%s", s.line, s.text, expand(w), out)
			}
		}
		for _, a := range c.absent {
			if strings.Contains(got, a) {
				t.Errorf("README.md:%d %s: the output has %q:\n%s", s.line, s.text, a, out)
			}
		}
	}
	// waitFor polls `status` until every server named is ready, as the
	// newcomer waits for run to say so.
	waitFor := func(names []string) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			out, _ := command(t.Context(), []string{"mcpledger", "status"}).Output()
			ok := true
			for _, n := range names {
				ok = ok && strings.Contains(readmeSqueeze(string(out)), "\n"+n+" ready ")
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %v to be ready: %s", names, out)
			}
		}
	}

	var run *exec.Cmd
	var runErr *faultBuffer
	t.Cleanup(func() {
		// A walk that failed with run running: stop it as Ctrl-C does, so
		// that it stops its servers; kill it if it does not end.
		if run == nil || run.ProcessState != nil {
			return
		}
		done := make(chan struct{})
		go func() {
			_ = run.Wait()
			close(done)
		}()
		_ = run.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = run.Process.Kill()
			<-done
		}
	})
	for i, s := range steps {
		c := readmeChecks[i]
		switch {
		case s.detach:
			run = command(context.Background(), s.args)
			runErr = &faultBuffer{}
			run.Stdout, run.Stderr = runErr, runErr
			if err := run.Start(); err != nil {
				t.Fatal(err)
			}
			// The first terminal: wait until run has said what the README
			// shows (every server settled, the next command).
			for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				out := readmeSqueeze(runErr.String())
				done := true
				for _, w := range c.want {
					done = done && strings.Contains(out, readmeSqueeze(expand(w)))
				}
				if done {
					break
				}
				if time.Now().After(deadline) {
					check(s, c, runErr.String())
					t.Fatalf("README.md:%d %s: not there after 60 s", s.line, s.text)
				}
			}
		case s.ctrlC:
			if err := run.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			// Ctrl-C is how run is stopped: every server stops and run
			// exits 0, as stopRun expects too.
			if err := run.Wait(); err != nil {
				t.Errorf("run after Ctrl-C: %v (want exit status 0)", err)
			}
			check(s, c, runErr.String())
		case s.args[0] == "go":
			// From the repository's root, as the README says; the Go
			// environment is the developer's (its caches), GOBIN is new.
			cmd := exec.CommandContext(t.Context(), "go", s.args[1:]...)
			cmd.Dir, cmd.Env = filepath.Join("..", ".."), append(os.Environ(), "GOBIN="+binDir)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("README.md:%d %s: %v\n%s", s.line, s.text, err, out)
			}
			if _, err := os.Stat(bin); err != nil {
				t.Fatalf("README.md:%d %s: no binary in GOBIN: %v", s.line, s.text, err)
			}
		default:
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			out, err := command(ctx, s.args).CombinedOutput()
			cancel()
			if err != nil {
				t.Fatalf("README.md:%d %s: %v\n%s", s.line, s.text, err, out)
			}
			check(s, c, string(out))
		}
		if len(c.ready) > 0 {
			waitFor(c.ready)
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	// What the README shows them print, they printed.
	shown, err := readmeShownLines(readReadme(t), readmeExampleDir, ws)
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range shown {
		found := false
		for _, l := range printed {
			found = found || sh.re.MatchString(l)
		}
		if !found {
			t.Errorf("README.md:%d shows a line no step printed:\n%s\n(pattern %s)", sh.line, sh.text, sh.re)
		}
	}
	page, err := os.ReadFile(filepath.Join(ws, "timeline.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"<html", "get-sum (mcp__everything__get-sum): ok", "mcp__files__list_directory", "approved"} {
		if !strings.Contains(string(page), w) {
			t.Errorf("timeline.html lacks %q", w)
		}
	}
}

// TestReadmeShownLines: a line the README shows matches the line printed
// with other values, column widths and the real workspace, and nothing
// that differs in a word, a unit or the directory; every output block of
// the README parses.
func TestReadmeShownLines(t *testing.T) {
	readme := "```" + readmeOutputTag + "\n$ mcpledger run\n 2.497s  everything       ready        13 tools\ntrusted /home/me/src/project (seq 15)\n```\n"
	shown, err := readmeShownLines(readme, readmeExampleDir, "/tmp/ws")
	if err != nil || len(shown) != 2 {
		t.Fatalf("readmeShownLines: %v, %d lines", err, len(shown))
	}
	for _, tc := range []struct {
		i    int
		line string
		want bool
	}{
		{0, "   13ms  everything ready 14 tools", true},
		{0, "1m2.5s  everything  ready  13 tools", false},
		{0, " 2.497s  everything       failed       13 tools", false},
		{0, " 2.497s  everything       ready        13 tools and more", false},
		{1, "trusted /tmp/ws (seq 2)", true},
		{1, "trusted /home/me/src/project (seq 15)", false},
		{1, "trusted /tmp/ws (seq x)", false},
	} {
		if got := shown[tc.i].re.MatchString(tc.line); got != tc.want {
			t.Errorf("%q against %q: %v, want %v", shown[tc.i].text, tc.line, got, tc.want)
		}
	}
	if _, err := readmeShownLines(readReadme(t), readmeExampleDir, "/tmp/ws"); err != nil {
		t.Fatal(err)
	}
}
