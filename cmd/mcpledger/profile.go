package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"runtime/trace"
)

// startCPUProfile writes a CPU profile of this process to path until the
// returned stop is called, and then the process's allocations so far to
// path+".allocs": MCPLEDGER_CPUPROFILE=FILE on serve, for studying where
// a gateway's time and allocations go (go tool pprof FILE, and
// go tool pprof -sample_index=alloc_objects FILE.allocs).
func startCPUProfile(path string) (stop func(), err error) {
	f, err := createFor("MCPLEDGER_CPUPROFILE", path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("MCPLEDGER_CPUPROFILE: %w (a CPU profile of this process is being written already: unset it)", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		if h, err := os.Create(path + ".allocs"); err == nil {
			pprof.Lookup("allocs").WriteTo(h, 0)
			h.Close()
		}
	}, nil
}

// startTrace writes an execution trace of this process to path until the
// returned stop is called: MCPLEDGER_TRACE=FILE on serve, for seeing where
// a gateway's calls wait (go tool trace -pprof=sched FILE, or
// -pprof=syscall: how long goroutines waited to run, and in syscalls).
func startTrace(path string) (stop func(), err error) {
	f, err := createFor("MCPLEDGER_TRACE", path)
	if err != nil {
		return nil, err
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("MCPLEDGER_TRACE: %w (a trace of this process is being written already: unset it)", err)
	}
	return func() {
		trace.Stop()
		f.Close()
	}, nil
}

// createFor creates path, the file the environment variable v names.
func createFor(v, path string) (*os.File, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (give a writable file, or unset it)", v, err)
	}
	return f, nil
}
