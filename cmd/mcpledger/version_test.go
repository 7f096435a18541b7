package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestReadBuildVersion: the module version, the commit (+dirty) and its
// time, and the Go version come from the build info; a build without VCS
// information says so.
func TestReadBuildVersion(t *testing.T) {
	platform := runtime.GOOS + "/" + runtime.GOARCH
	for _, c := range []struct {
		bi   *debug.BuildInfo
		want string
	}{
		{&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef"}, {Key: "vcs.time", Value: "2026-11-27T07:00:00Z"}, {Key: "vcs.modified", Value: "true"}}},
			"mcpledger v1.2.3, commit 0123456789abcdef+dirty (2026-11-27T07:00:00Z), go1.26.0 " + platform + "\n"},
		{&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef"}, {Key: "vcs.modified", Value: "false"}}},
			"mcpledger (devel), commit 0123456789abcdef, go1.26.0 " + platform + "\n"},
		{&debug.BuildInfo{GoVersion: "go1.26.0"}, "mcpledger (devel), commit unknown (built without VCS information), go1.26.0 " + platform + "\n"},
		{nil, "mcpledger (devel), commit unknown (built without VCS information), " + runtime.Version() + " " + platform + "\n"},
	} {
		if got := readBuildVersion(c.bi).String(); got != c.want {
			t.Errorf("got  %q\nwant %q", got, c.want)
		}
	}
}

// TestVersionCommand: version and --version print the same line, from
// this binary's build info; version --json its fields.
func TestVersionCommand(t *testing.T) {
	v := runCLI(t, "version")
	if v.err != nil || v.stdout != thisBuild().String() || !strings.Contains(v.stdout, runtime.Version()) {
		t.Errorf("version: %v %q", v.err, v.stdout)
	}
	if r := runCLI(t, "--version"); r.err != nil || r.stdout != v.stdout {
		t.Errorf("--version: %v %q, want %q", r.err, r.stdout, v.stdout)
	}
	r := runCLI(t, "version", "--json")
	var got buildVersion
	if err := json.Unmarshal([]byte(r.stdout), &got); r.err != nil || err != nil || got != thisBuild() {
		t.Errorf("version --json: %v %v\n%s", r.err, err, r.stdout)
	}
}

// buildCLI builds this command into a temporary directory.
func buildCLI(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary; skipped under -short")
	}
	bin := filepath.Join(t.TempDir(), "mcpledger")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestVersionOfABuild: a binary built from a git checkout (-buildvcs=true,
// as go install does in one) names the commit it was built from, and
// +dirty when the checkout has a change. The checkout is a new repository
// holding this working tree in one commit: go stamps no VCS information in
// a git worktree.
func TestVersionOfABuild(t *testing.T) {
	if testing.Short() {
		t.Skip("copies the module into a new repository and builds the binary twice; skipped under -short")
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	files, err := exec.Command("git", "-C", strings.TrimSpace(string(top)), "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(t.TempDir(), "src")
	for name := range strings.SplitSeq(strings.TrimSuffix(string(files), "\x00"), "\x00") {
		b, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(top)), name))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the working tree
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(clone, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(clone, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", clone, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %q: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "--quiet")
	git("add", "-A")
	git("commit", "--quiet", "-m", "the working tree")
	head := git("rev-parse", "HEAD")
	version := func() buildVersion {
		t.Helper()
		bin := filepath.Join(t.TempDir(), "mcpledger")
		build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, "./cmd/mcpledger")
		build.Dir = clone
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		out, err := exec.Command(bin, "version", "--json").Output()
		if err != nil {
			t.Fatal(err)
		}
		var v buildVersion
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return v
	}
	v := version()
	if v.Commit != head || v.Dirty || v.CommitTime == "" || v.Go != runtime.Version() {
		t.Errorf("version --json = %+v, want commit %s, clean, and %s", v, head, runtime.Version())
	}
	if err := os.WriteFile(filepath.Join(clone, "cmd", "mcpledger", "zz_dirty.go"), []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if v := version(); v.Commit != head || !v.Dirty || !strings.Contains(v.String(), v.Commit+"+dirty") {
		t.Errorf("after a change: %+v, want commit %s+dirty", v, head)
	}
}
