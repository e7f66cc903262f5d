package e2e_test

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"testing"
)

// parallelDefault is how many parallel tests and subtests run at once when
// go test is given no -parallel (go test's own default is GOMAXPROCS, 2 on
// a 2-core machine). Every test here runs beside the others on clusters of
// its own, and a test spends most of its time waiting on timers (leases,
// TTLs, election timeouts, a killed node's restart), not on the CPU: on 2
// cores, four at once keep the CPUs busy without starving the nodes (the
// lease-bound tests judge an expiry's lateness from the node's own logs, so
// a loaded machine does not fail them).
const parallelDefault = 4

// TestMain runs the tests with parallelDefault as go test's -parallel
// unless the command line gives one (go test -parallel N, or
// -test.parallel N to the test binary), which wins.
func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(parallelDefault)); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: setting -test.parallel: %v\n", err)
			os.Exit(2)
		}
	}
	os.Exit(m.Run())
}
