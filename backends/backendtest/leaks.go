package backendtest

import "go.uber.org/goleak"

// FailedOpenLeaks are the goleak options of a backend package's TestMain:
// badger.Open leaves these two goroutines behind when it fails on a data
// dir whose tables are damaged or missing (damaged_log_refused,
// file_loss_never_shortens); a DB leaked by the package itself would still
// show its many other goroutines.
func FailedOpenLeaks() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("github.com/dgraph-io/ristretto/v2/z.(*AllocatorPool).freeupAllocators"),
		goleak.IgnoreTopFunction("github.com/dgraph-io/badger/v4.(*DB).monitorCache"),
	}
}
