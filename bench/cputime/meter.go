package cputime

import (
	"errors"
	"os"
	"time"
)

// Meter samples, at the same instant, the CPU time of the server processes
// of a benchmark (Servers: ticketd's nodes, etcd's members) and of its
// client processes (Clients), from /proc, so that a window's CPU can be
// split between the two sides (CPU per operation). It is a plain
// value, JSON-encodable, so a parent can hand it to the client process it
// starts.
type Meter struct {
	// Servers and Clients are process ids; 0 stands for the process that
	// samples (os.Getpid()). Either may be empty: that side is then not
	// measured (Usage says so).
	Servers []int `json:"servers"`
	Clients []int `json:"clients"`
}

// Sample is a Meter's reading at one instant.
type Sample struct {
	At             time.Time
	Server, Client time.Duration
}

// Sample reads every process of m now, each once: a process listed on both
// sides (or twice) counts the same reading each time, so both sides see it
// at the same instant (two reads of /proc may differ by a clock tick).
// Errors: ErrProc (a process that exited or cannot be read), joined over the
// processes.
func (m Meter) Sample() (Sample, error) {
	s := Sample{At: time.Now()}
	var errs []error
	seen := make(map[int]time.Duration)
	read := func(pids []int) time.Duration {
		var sum time.Duration
		for _, pid := range pids {
			if pid == 0 {
				pid = os.Getpid()
			}
			d, ok := seen[pid]
			if !ok {
				var err error
				d, err = PID(pid)
				errs = append(errs, err)
				seen[pid] = d
			}
			sum += d
		}
		return sum
	}
	s.Server, s.Client = read(m.Servers), read(m.Clients)
	return s, errors.Join(errs...)
}

// Usage is the CPU the server and client processes used over a window.
// JSON names are those of the report file.
type Usage struct {
	// WallSec is the window's wall time in seconds.
	WallSec float64 `json:"wall_sec"`
	// ServerSec and ClientSec are the user+system CPU seconds the server
	// processes and the client processes used in it; ServerProcs and
	// ClientProcs how many processes each side had (0: that side was not
	// measured apart, e.g. clients running inside the server process).
	ServerSec   float64 `json:"server_sec"`
	ClientSec   float64 `json:"client_sec"`
	ServerProcs int     `json:"server_procs"`
	ClientProcs int     `json:"client_procs"`
}

// Between returns what m's processes used from a to b (two Samples of m).
func (m Meter) Between(a, b Sample) Usage {
	return Usage{
		WallSec:   b.At.Sub(a.At).Seconds(),
		ServerSec: (b.Server - a.Server).Seconds(), ClientSec: (b.Client - a.Client).Seconds(),
		ServerProcs: len(m.Servers), ClientProcs: len(m.Clients),
	}
}
