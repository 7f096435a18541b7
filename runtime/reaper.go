package runtime

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// shimEnv marks a process started as the reaper (its value is reaperMode).
const shimEnv = "MCPLEDGER_SHIM"

// RunShimIfRequested turns this process into the runtime's reaper if the
// runtime started it as one, and then never returns. A program that embeds
// the runtime calls it first thing in main and sets [Options.ShimPath] to
// its own executable; mcpledger's CLI does.
//
// Why a reaper: a stdio server runs in its own process group so that
// stopping it reaches its children too (a wrapper such as `sh -c` or npx).
// But if mcpledger itself is killed (kill -9), nothing stops the group:
// the kernel's parent-death signal reaches only the direct child. The
// reaper, one process per Manager, is told each server's group as it is
// spawned and ended; when mcpledger dies, the pipe it reads from ends, and
// it kills every group still listed.
func RunShimIfRequested() {
	if os.Getenv(shimEnv) != reaperMode {
		return
	}
	os.Exit(runReaper(os.Stdin))
}

// reaper guards the process groups of a Manager's stdio servers against
// mcpledger's own death. A server is spawned as the leader of its own
// group with a parent-death signal, but that signal reaches only the
// direct child: a wrapper's children (`sh -c`, npx) would outlive a
// kill -9 of mcpledger. So one helper process per Manager (Options.ShimPath
// started in reaper mode, see RunShimIfRequested) reads the groups to
// guard from a pipe, and when the pipe ends (mcpledger died or closed it)
// it sends SIGKILL to every group still on its list.
//
// One helper for the whole session instead of one shim process per
// server: starting 20 servers costs 20 process starts, not 40.
type reaper struct {
	path string
	log  *slog.Logger

	mu      sync.Mutex
	started bool
	cmd     *exec.Cmd
	w       io.WriteCloser
}

func newReaper(path string, log *slog.Logger) *reaper {
	if path == "" {
		return nil
	}
	return &reaper{path: path, log: log}
}

// watch puts group pgid on the list; the helper starts with the first.
func (r *reaper) watch(pgid int) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started {
		r.start()
	}
	r.send('+', pgid)
}

// forget takes group pgid off the list: it has been ended.
func (r *reaper) forget(pgid int) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.send('-', pgid)
}

func (r *reaper) start() {
	r.started = true
	cmd := exec.Command(r.path)
	cmd.Env = append(os.Environ(), shimEnv+"="+reaperMode)
	// Its own group: a terminal's ^C is for mcpledger to handle.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	w, err := cmd.StdinPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		r.log.Warn("cannot start the reaper process: a kill -9 of mcpledger may leave servers' child processes running; Options.ShimPath must name an executable that calls RunShimIfRequested first", "path", r.path, "err", err)
		return
	}
	r.cmd, r.w = cmd, w
}

func (r *reaper) send(op byte, pgid int) {
	if r.w == nil {
		return
	}
	if _, err := fmt.Fprintf(r.w, "%c%d\n", op, pgid); err != nil {
		r.log.Warn("the reaper process is gone: a kill -9 of mcpledger may leave servers' child processes running", "err", err)
		_ = r.w.Close()
		r.w = nil
	}
}

// close ends the helper, which kills any group still listed (none after a
// clean stop), and waits for it.
func (r *reaper) close() {
	if r == nil {
		return
	}
	r.mu.Lock()
	cmd, w := r.cmd, r.w
	r.w = nil
	r.mu.Unlock()
	if w != nil {
		_ = w.Close()
	}
	if cmd == nil {
		return
	}
	done := make(chan struct{})
	go func() { // ends when the helper does; close waits for it
		_ = cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// reaperMode is shimEnv's value that starts a process as a reaper.
const reaperMode = "reaper"

// runReaper is the helper's side: it reads "+PGID" and "-PGID" lines until
// the pipe ends, then kills every group still listed.
func runReaper(in io.Reader) int {
	// mcpledger's end of the pipe decides, not signals: a terminal's ^C or
	// a hang-up goes to mcpledger, which stops the servers itself.
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGQUIT)
	self := os.Getpid()
	groups := map[int]bool{}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		line := sc.Text()
		if len(line) < 2 {
			continue
		}
		pgid, err := strconv.Atoi(line[1:])
		if err != nil || pgid <= 1 || pgid == self { // never kill(-1) or itself
			continue
		}
		switch line[0] {
		case '+':
			groups[pgid] = true
		case '-':
			delete(groups, pgid)
		}
	}
	for g := range groups {
		_ = syscall.Kill(-g, syscall.SIGKILL)
	}
	return 0
}
