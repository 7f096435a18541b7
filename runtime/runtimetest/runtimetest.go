// Package runtimetest holds helpers for tests that supervise real MCP server
// processes: it builds the misbehaving test server in testdata/mcpserver
// (whose package comment lists its MCPTEST_* modes), starts it in HTTP mode,
// and inspects process groups through /proc so that tests can prove nothing
// was left running.
//
// The process helpers read /proc and so need Linux.
package runtimetest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

const module = "github.com/mcpledger/mcpledger"

var build struct {
	once sync.Once
	path string
	skip string // why the build cannot run here
	err  error
}

// BuildServer builds testdata/mcpserver and returns the path of the binary.
//
// The build runs once per test binary. Its output is kept under
// os.TempDir() in a directory named after a hash of the server's sources,
// go.mod, go.sum and the toolchain settings, so the test binaries of every
// package share one build and nothing needs removing at exit (directories
// of earlier source versions are pruned once unused for a day). BuildServer
// skips the test if the go command cannot be found, and fails it if the
// build fails.
func BuildServer(tb testing.TB) string {
	tb.Helper()
	build.once.Do(func() { build.path, build.skip, build.err = buildServer() })
	if build.skip != "" {
		tb.Skip(build.skip)
	}
	if build.err != nil {
		tb.Fatalf("runtimetest: building testdata/mcpserver: %v", build.err)
	}
	return build.path
}

func goCommand() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return ""
}

// moduleRoot finds the directory of mcpledger's go.mod, walking up from the
// working directory (a test runs in its package directory).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(b, []byte("module "+module+"\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod for %s above the working directory", module)
		}
		dir = parent
	}
}

func buildServer() (path, skip string, err error) {
	goBin := goCommand()
	if goBin == "" {
		return "", "runtimetest: the go command is not installed; it is needed to build testdata/mcpserver", nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", "", err
	}
	src := filepath.Join(root, "testdata", "mcpserver")

	// The cache key: toolchain settings and every input of the build that
	// lives in this module.
	h := sha256.New()
	out, err := exec.Command(goBin, "env", "GOVERSION", "GOOS", "GOARCH", "GOFLAGS", "CGO_ENABLED").Output()
	if err != nil {
		return "", "", fmt.Errorf("go env: %w", err)
	}
	h.Write(out)
	files := []string{filepath.Join(root, "go.mod"), filepath.Join(root, "go.sum")}
	entries, err := os.ReadDir(src)
	if err != nil {
		return "", "", err
	}
	for _, e := range entries {
		if !e.IsDir() {
			files = append(files, filepath.Join(src, e.Name()))
		}
	}
	slices.Sort(files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", "", err
		}
		fmt.Fprintf(h, "%s %d\n", filepath.Base(f), len(b))
		h.Write(b)
	}
	const prefix = "mcpledger-mcptest-"
	dir := filepath.Join(os.TempDir(), prefix+hex.EncodeToString(h.Sum(nil))[:20])
	bin := filepath.Join(dir, "mcpserver")
	if _, err := os.Stat(bin); err == nil {
		now := time.Now()
		_ = os.Chtimes(dir, now, now) // in use: keep pruneOldBuilds away
		return bin, "", nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	// Build to a private name and rename, so that test binaries of other
	// packages building at the same time never run a half-written file.
	tmp := bin + ".tmp" + strconv.Itoa(os.Getpid())
	cmd := exec.Command(goBin, "build", "-buildvcs=false", "-o", tmp, "./testdata/mcpserver")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", "", fmt.Errorf("%v\n%s", err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", "", err
	}
	pruneOldBuilds(prefix, dir)
	return bin, "", nil
}

// pruneOldBuilds removes build directories of other source versions that
// have not been touched for a day.
func pruneOldBuilds(prefix, keep string) {
	old, _ := filepath.Glob(filepath.Join(os.TempDir(), prefix+"*"))
	for _, d := range old {
		if d == keep {
			continue
		}
		if fi, err := os.Stat(d); err == nil && fi.IsDir() && time.Since(fi.ModTime()) > 24*time.Hour {
			os.RemoveAll(d)
		}
	}
}

// lineWriter is an io.Writer that keeps everything written to it and hands
// each complete line to onLine.
type lineWriter struct {
	mu      sync.Mutex
	all     bytes.Buffer
	partial []byte
	onLine  func(string)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all.Write(p)
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		line := string(w.partial[:i])
		w.partial = w.partial[i+1:]
		if w.onLine != nil {
			w.onLine(line)
		}
	}
	return len(p), nil
}

func (w *lineWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.all.String()
}

// trimLog shortens s to its last n bytes for a failure message.
func trimLog(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// BuildMcpledger builds cmd/mcpledger into dir and returns the binary's
// path (for benchmarks that run the CLI as production does).
func BuildMcpledger(tb testing.TB, dir string) string {
	tb.Helper()
	root, err := moduleRoot()
	if err != nil {
		tb.Fatal(err)
	}
	out := filepath.Join(dir, "mcpledger")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/mcpledger")
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("building mcpledger: %v\n%s", err, msg)
	}
	return out
}
