package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// startCPUProfile writes a CPU profile of this process to path until the
// returned stop is called: MCPLEDGER_CPUPROFILE=FILE on serve, for
// studying where a gateway's time goes (go tool pprof FILE).
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
	}, nil
}
