package main

import (
	"fmt"
	"sync"
	"time"
)

// progressAfter is how long an operation runs before its progress line
// appears: what ends sooner shows nothing.
const progressAfter = time.Second

// progressLine is a single line on a terminal's stderr that says what a
// long operation is doing and for how long, rewritten in place every
// second until end clears it. Off a terminal it does nothing: nothing is
// written, no goroutine runs.
type progressLine struct {
	mu    sync.Mutex
	stage string
	stop  chan struct{}
	wg    sync.WaitGroup
}

// progress starts the progress line of an operation, whose first stage
// is stage; it is shown once the operation has taken after (progressAfter
// unless a test says otherwise). The caller must call end.
func (e *env) progress(stage string, after time.Duration) *progressLine {
	p := &progressLine{stage: stage}
	isTerm := e.terminal
	if isTerm == nil {
		isTerm = isTerminal
	}
	w := e.stderr
	if !isTerm(w) {
		return p
	}
	p.stop = make(chan struct{})
	p.wg.Go(func() {
		t0 := time.Now()
		tick := time.NewTimer(after)
		defer tick.Stop()
		shown := false
		for {
			select {
			case <-p.stop:
				if shown {
					fmt.Fprint(w, "\r\033[K")
				}
				return
			case <-tick.C:
				p.mu.Lock()
				stage := p.stage
				p.mu.Unlock()
				fmt.Fprintf(w, "\r\033[K%s (%s)", stage, time.Since(t0).Round(time.Second))
				shown = true
				tick.Reset(time.Second)
			}
		}
	})
	return p
}

// set changes what the line says, from its next update.
func (p *progressLine) set(stage string) {
	p.mu.Lock()
	p.stage = stage
	p.mu.Unlock()
}

// end clears the line (if it was shown) and stops its goroutine.
func (p *progressLine) end() {
	if p.stop != nil {
		close(p.stop)
		p.wg.Wait()
		p.stop = nil
	}
}
