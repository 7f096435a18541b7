package guard

import (
	"flag"
	"fmt"
	"os"
	"testing"
	"time"
)

// shortDeadline bounds a -short run of the package's tests, which takes
// a tenth of a second (under 2 s with the race detector): every function
// here is a bounded scan, so a run still going after it hangs.
const shortDeadline = 5 * time.Second

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// The fast tier runs once per mutant (.ci/mutation): a mutant that
		// makes a scan loop forever fails the run at shortDeadline, instead
		// of at gremlins' timeout, ten times a clean run and its build.
		time.AfterFunc(shortDeadline, func() {
			panic(fmt.Sprintf("the -short tests are still running after %v: a test hangs", shortDeadline))
		})
	}
	os.Exit(m.Run())
}
