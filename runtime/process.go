package runtime

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime/config"
)

// stderrTailLines is how many of a server's last stderr lines are kept and
// journaled when it exits.
const stderrTailLines = 20

// process is one stdio server process, leader of its own process group.
type process struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   io.ReadCloser
	pid   int
	tail  *tail
	done  chan struct{} // closed when the leader has been reaped
	// reaper guards the group until terminate or kill has ended it.
	reaper *reaper
	state  *os.ProcessState
	werr   error

	mu       sync.Mutex
	expected bool // mcpledger asked it to end
}

// spawn starts spec's command in a new process group with stdio pipes. The
// child gets SIGKILL if mcpledger dies (Pdeathsig); r, when set, guards the
// rest of its group (a wrapper's children) too (see reaper). A command or
// working directory that does not exist, or a command that cannot be
// executed, is a *commandError: the config must change before a launch
// can succeed.
func spawn(spec *config.Spec, r *reaper) (*process, error) {
	env := append(os.Environ(), spec.Env...) // mcpledger's environment plus the server's own
	if spec.Cwd != "" {
		if fi, err := os.Stat(spec.Cwd); err != nil || !fi.IsDir() {
			return nil, notFound(err, "working directory %q: no such directory (\"cwd\" in its config)", spec.Cwd)
		}
	}
	// Resolve the command as the child would (its PATH, its cwd), so that a
	// missing executable is a spawn error.
	path, err := lookPath(spec.Command, env, spec.Cwd)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, spec.Args...)
	cmd.Args[0] = spec.Command
	cmd.Env = env
	cmd.Dir = spec.Cwd
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, stdin: stdin, out: stdout, tail: newTail(stderrTailLines), done: make(chan struct{}), reaper: r}
	cmd.Stderr = p.tail
	cmd.WaitDelay = 250 * time.Millisecond // else Wait waits for stderr's EOF, which a grandchild holding the pipe delays forever, and the exit goes unseen
	if err := cmd.Start(); err != nil {
		return nil, startError(spec.Command, err)
	}
	p.pid = cmd.Process.Pid
	r.watch(p.pid)
	return p, nil
}

// commandError is a spawn error of a command that cannot run as
// configured: class events.ErrNotFound or events.ErrNotExecutable
// (classifyConnect journals it so: no retry of the same config).
type commandError struct {
	class events.ErrorClass
	msg   string
	err   error // the system's error, if any
}

func (e *commandError) Error() string { return e.msg }
func (e *commandError) Unwrap() error { return e.err }

func notFound(err error, format string, args ...any) error {
	return &commandError{class: events.ErrNotFound, msg: fmt.Sprintf(format, args...), err: err}
}

func notExecutable(err error, format string, args ...any) error {
	return &commandError{class: events.ErrNotExecutable, msg: fmt.Sprintf(format, args...), err: err}
}

// startError classifies the error of starting command, found by
// lookPath: the kernel refusing to execute it (no permission, a format it
// cannot run) is not_executable; a missing file at this point is a
// script's interpreter (its #! line): not_found.
func startError(command string, err error) error {
	switch {
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.ENOEXEC), errors.Is(err, syscall.EPERM):
		return notExecutable(err, "command %q cannot be executed: %v", command, err)
	case errors.Is(err, syscall.ENOENT):
		return notFound(err, "command %q cannot be started: %v (if it is a script, is the interpreter on its #! line installed?)", command, err)
	}
	return err
}

// lookPath resolves command as exec would in the child: through PATH from
// env when it has no slash, relative to dir when it does. A command that
// is not there is not_found; one that is there but is a directory or has
// no execute permission is not_executable (a *commandError).
func lookPath(command string, env []string, dir string) (string, error) {
	if strings.Contains(command, "/") {
		p := command
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		fi, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return "", notFound(err, "command %q: no such file", command)
		case err != nil:
			return "", notExecutable(err, "command %q: %v", command, err)
		case fi.IsDir():
			return "", notExecutable(nil, "command %q is a directory", command)
		case fi.Mode()&0o111 == 0:
			return "", notExecutable(nil, "command %q has no execute permission (chmod +x, or run it through its interpreter)", command)
		}
		return p, nil
	}
	pathEnv := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v // the last one wins, as in the child
		}
	}
	var unrunnable string // a match that is a directory or not executable
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, command)
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		if !fi.IsDir() && fi.Mode()&0o111 != 0 {
			if !filepath.IsAbs(p) && dir != "" {
				p = filepath.Join(dir, p)
			}
			return p, nil
		}
		if unrunnable == "" {
			unrunnable = p
		}
	}
	if unrunnable != "" {
		return "", notExecutable(nil, "command %q: %s (found through $PATH) is not an executable file", command, unrunnable)
	}
	return "", notFound(nil, "command %q is not in any directory of $PATH (install it, or give its absolute path)", command)
}

// wait reaps the leader; it is run by exactly one goroutine, which owns it.
func (p *process) wait() {
	p.werr = p.cmd.Wait()
	p.state = p.cmd.ProcessState
	close(p.done)
}

func (p *process) markExpected() {
	p.mu.Lock()
	p.expected = true
	p.mu.Unlock()
}

func (p *process) isExpected() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.expected
}

// exitStatus returns the exit code (or -1) and the signal name, if any.
func (p *process) exitStatus() (int, string) {
	if p.state == nil {
		return -1, ""
	}
	if ws, ok := p.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -1, ws.Signal().String()
	}
	return p.state.ExitCode(), ""
}

// terminate ends the whole process group: close stdin, wait grace; SIGTERM
// the group, wait grace; SIGKILL the group. It returns when the leader has
// been reaped and the group has been sent SIGKILL (grandchildren that
// outlived the leader included). It never takes much longer than 2×grace.
func (p *process) terminate(grace time.Duration) {
	p.markExpected()
	_ = p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = syscall.Kill(-p.pid, syscall.SIGKILL)
			<-p.done
		}
	}
	// The leader is gone; anything left in its group (a wrapper's
	// grandchild) is killed too.
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	p.reaper.forget(p.pid)
}

// kill ends the group at once (abort path, or a hung server).
func (p *process) kill() {
	p.markExpected()
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	_ = p.stdin.Close()
	<-p.done
	_ = syscall.Kill(-p.pid, syscall.SIGKILL) // what joined the group meanwhile
	p.reaper.forget(p.pid)
}

// tail keeps the last n lines written to it (a server's stderr).
type tail struct {
	mu      sync.Mutex
	n       int
	lines   []string
	partial []byte
	total   int
}

func newTail(n int) *tail { return &tail{n: n} }

// Write implements io.Writer; it never fails.
func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total += len(b)
	data := append(t.partial, b...)
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		t.push(string(bytes.TrimRight(data[:i], "\r")))
		data = data[i+1:]
	}
	if len(data) > 4096 {
		data = data[len(data)-4096:]
	}
	t.partial = append(t.partial[:0], data...)
	return len(b), nil
}

func (t *tail) push(line string) {
	if len(line) > 512 {
		line = line[:512] + "…"
	}
	t.lines = append(t.lines, line)
	if len(t.lines) > t.n {
		t.lines = t.lines[len(t.lines)-t.n:]
	}
}

// Lines returns the kept lines, including an unterminated last one.
func (t *tail) Lines() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := append([]string(nil), t.lines...)
	if len(t.partial) > 0 {
		out = append(out, string(t.partial))
	}
	return out
}

// jsonLines passes through only lines that can be JSON-RPC messages (the
// first non-space byte is '{' or '[', and a complete line names
// "jsonrpc"; go-sdk ends the session on any other line). Anything else a server prints on
// stdout (banners, logs) is skipped and reported to skipped, instead of
// breaking the session.
type jsonLines struct {
	r       *bufio.Reader
	c       io.Closer
	buf     []byte // what Read has yet to return, in back
	back    []byte // buf's storage, reused line after line
	skipped func(line string)
	// cont is the verdict on a line longer than the buffer, carried over
	// its continuation pieces: 0 none, 1 passing it, 2 skipping it.
	cont int
}

func newJSONLines(rc io.ReadCloser, skipped func(string)) *jsonLines {
	return &jsonLines{r: bufio.NewReaderSize(rc, 64<<10), c: rc, skipped: skipped}
}

func (j *jsonLines) Read(p []byte) (int, error) {
	for len(j.buf) == 0 {
		line, err := j.r.ReadSlice('\n')
		partial := errors.Is(err, bufio.ErrBufferFull)
		if len(line) > 0 {
			switch j.cont {
			case 1:
				j.back = append(j.back[:0], line...)
				j.buf = j.back
			case 2:
				// the rest of a skipped line
			default:
				trimmed := bytes.TrimLeft(line, " \t\r")
				pass := len(trimmed) == 0 || trimmed[0] == '\n' ||
					(trimmed[0] == '{' || trimmed[0] == '[') && (partial || bytes.Contains(line, []byte(`"jsonrpc"`)))
				if pass {
					j.back = append(j.back[:0], line...)
					j.buf = j.back
				} else if j.skipped != nil {
					preview := bytes.TrimRight(line, "\r\n")
					if len(preview) > 256 {
						preview = preview[:256]
					}
					j.skipped(string(preview))
				}
				if partial {
					j.cont = 2
					if pass {
						j.cont = 1
					}
				}
			}
			if !partial {
				j.cont = 0
			}
		}
		if err != nil && !partial {
			if len(j.buf) > 0 {
				break
			}
			return 0, err
		}
	}
	n := copy(p, j.buf)
	j.buf = j.buf[n:]
	return n, nil
}

func (j *jsonLines) Close() error { return j.c.Close() }

// ctxDone reports whether ctx has ended, for loops that poll.
func ctxDone(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

func describeExit(code int, sig string) string {
	if sig != "" {
		return "signal: " + sig
	}
	return fmt.Sprintf("exit status %d", code)
}

func killGroup(pgid int) error { return syscall.Kill(-pgid, syscall.SIGKILL) }
