package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// startCPUProfile writes a CPU profile of this process to path until the
// returned stop is called, and then the process's allocations so far to
// path+".allocs": MCPLEDGER_CPUPROFILE=FILE on serve, for studying where
// a gateway's time and allocations go (go tool pprof FILE, and
// go tool pprof -sample_index=alloc_objects FILE.allocs).
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("MCPLEDGER_CPUPROFILE: %w (give a writable file, or unset it)", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("MCPLEDGER_CPUPROFILE: %w (give a writable file, or unset it)", err)
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
