//go:build linux

package e2e_test

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// openPTY opens a pseudo-terminal pair (ptmx(4)): the master, and the slave
// a process can take as its controlling terminal.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = master.Close() })
	var unlock int32
	_, _, e := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock)))
	require.Zero(t, e, "unlockpt")
	var n uint32
	_, _, e = syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n)))
	require.Zero(t, e, "ptsname")
	slave, err = os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = slave.Close() })
	return master, slave
}

// TestLockRunCommandReadsTerminal: ticketctl run from a terminal (a
// session leader with the terminal as its controlling tty and stdin) gives
// the terminal's foreground to the command's process group, so a command
// that reads the terminal gets its input instead of being stopped by
// SIGTTIN as a background job; ticketctl exits with its status.
func TestLockRunCommandReadsTerminal(t *testing.T) {
	t.Parallel() // its own cluster, ports and data dirs: beside the others (see matrix)
	c := start(t, backends()[0])
	master, slave := openPTY(t)
	out := filepath.Join(t.TempDir(), "line")
	cmd, _, stderr := ctlCmd(t, c, "lock", "run", "tty/a", "--", "sh", "-c", `read line; echo "$line" > `+out)
	cmd.Stdin = slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	require.NoError(t, cmd.Start())
	_, err := master.Write([]byte("hello\n"))
	require.NoError(t, err)
	assert.Equal(t, "hello", waitFile(t, out), "stderr: %s", stderr)
	assert.Equal(t, 0, waitExit(t, cmd), "stderr: %s", stderr)
	requireFree(t, c, "tty/a")
}
