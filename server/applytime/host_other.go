//go:build !linux

package applytime

import (
	"os"
	"time"
)

const supported = false

// HostClock returns a clock whose every reading fails: no boot id here, so
// Open fails with ErrUnsupported before reading it.
func HostClock() Host { return hostClock{} }

type hostClock struct{}

func (hostClock) Epoch() (string, error)        { return "", ErrUnsupported }
func (hostClock) Since() (time.Duration, error) { return 0, ErrUnsupported }

func fallocate(*os.File, int64, int64) error { return errNoFallocate }
func lockFile(*os.File) error                { return ErrUnsupported }
func mapFile(*os.File, int) ([]byte, error)  { return nil, ErrUnsupported }
func unmapFile([]byte) error                 { return ErrUnsupported }
