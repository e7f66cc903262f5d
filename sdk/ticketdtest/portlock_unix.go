//go:build unix

package ticketdtest

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// reservePort claims port for this process against every other test
// process on the machine that picks ports by the same rule (sdk/ticketdtest
// and backends/backendtest): an exclusive flock(2) on
// $TMPDIR/ticketd-test-ports/<port>.lock, held until this process exits
// (the kernel drops it then, so a killed test leaves no claim behind). It
// reports false when another live process holds the port's claim: three
// suites run at once under make test, and a port one process checked free
// and closed could otherwise be bound by another before its own peer binds
// it ("bind: address already in use"). Any error other than a held claim
// (no temp dir, ...) reports true: the listen check still applies.
func reservePort(port int) bool {
	dir := filepath.Join(os.TempDir(), "ticketd-test-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return true
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)+".lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return err != syscall.EWOULDBLOCK
	}
	portClaims = append(portClaims, f) // kept open: the claim lasts as long as the process
	return true
}

// portClaims are the open lock files of the ports this process claimed.
var portClaims []*os.File
