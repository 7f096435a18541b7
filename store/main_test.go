package store_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/store"
	"github.com/mcpledger/mcpledger/store/storetest"
)

// Child processes are this test binary re-executed with childEnv set to
// "MODE PATH"; TestMain runs the mode instead of the tests.
const (
	childEnv    = "STORE_TEST_CHILD"
	sessionsEnv = "STORE_TEST_SESSIONS"
)

// shortDeadline bounds a -short run of the package's tests, which takes
// seconds.
const shortDeadline = time.Minute

func TestMain(m *testing.M) {
	if c := os.Getenv(childEnv); c != "" {
		mode, path, _ := strings.Cut(c, " ")
		if err := runChild(mode, path); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	flag.Parse()
	if testing.Short() {
		// The fast tier runs once per mutant (mutation runs): a test that
		// a mutant makes hang fails the run after a minute, instead of
		// after go test's -timeout, ten times a clean run.
		time.AfterFunc(shortDeadline, func() {
			panic(fmt.Sprintf("the -short tests are still running after %v: a test hangs", shortDeadline))
		})
	}
	code := m.Run()
	cleanupReplay()
	os.Exit(code)
}

func runChild(mode, path string) error {
	switch mode {
	case "hold":
		return holdChild(path)
	case "append":
		return appendChild(path)
	case "archive":
		return archiveChild(path)
	}
	return fmt.Errorf("unknown child mode %q", mode)
}

// holdChild opens the journal, says "ready", and holds it until its
// stdin closes.
func holdChild(path string) error {
	j, err := store.Open(path, nil)
	if err != nil {
		return err
	}
	defer j.Close()
	fmt.Println("ready")
	_, err = io.Copy(io.Discard, os.Stdin)
	return err
}

// appendChild appends to the sessions named in sessionsEnv, one producer
// per session, one event per Append, and after each Append returns
// writes "SESSION SEQ" to stdout: the parent counts that as acknowledged.
// It runs until it is killed.
func appendChild(path string) error {
	j, err := store.Open(path, nil)
	if err != nil {
		return err
	}
	var sids []uuid.UUID
	for _, s := range strings.Split(os.Getenv(sessionsEnv), ",") {
		sid, err := uuid.Parse(s)
		if err != nil {
			return err
		}
		sids = append(sids, sid)
	}
	errs := make(chan error, len(sids))
	for i, sid := range sids {
		go func() { // runs until the process is killed
			for n := 0; ; n++ {
				res, err := j.Append(context.Background(), sid, store.Any,
					[]events.Event{storetest.Event("s"+strconv.Itoa(i), n, testTime)})
				if err != nil {
					errs <- err
					return
				}
				line := sid.String() + " " + strconv.FormatUint(res.LastSeq, 10) + "\n"
				if _, err := os.Stdout.WriteString(line); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	return <-errs
}

// readLines sends each line of r on a channel, closed at EOF.
func readLines(r io.Reader) <-chan string {
	ch := make(chan string, 1024)
	go func() { // ends at EOF, when the child's stdout closes
		defer close(ch)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			ch <- sc.Text()
		}
	}()
	return ch
}
