package floor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/ticketd/ticketd/bench/latency"
)

// Sentinel errors of package floor.
var (
	// ErrNoSamples: the time budget ran out before a single sample was taken.
	ErrNoSamples = errors.New("floor: no samples taken")
)

// Defaults of Config.
const (
	// DefaultSamples is how many appends or round trips are timed.
	DefaultSamples = 2000
	// DefaultBudget bounds one measurement's wall time; it stops early (with
	// fewer samples) on a slow disk.
	DefaultBudget = 3 * time.Second
	// DefaultRecordBytes is the size of one append: about one small Raft entry.
	DefaultRecordBytes = 100
	// DefaultMessageBytes is the size of one ping and of its pong.
	DefaultMessageBytes = 64
)

// Config sizes a measurement; zero fields take the defaults above.
type Config struct {
	// Samples is the number of operations to time.
	Samples int
	// Budget stops the measurement early once this much time has passed.
	Budget time.Duration
	// Bytes is the append size (Fsync) or the message size (RTT), in bytes.
	Bytes int
}

func (c Config) withDefaults(bytes int) Config {
	if c.Samples <= 0 {
		c.Samples = DefaultSamples
	}
	if c.Budget <= 0 {
		c.Budget = DefaultBudget
	}
	if c.Bytes <= 0 {
		c.Bytes = bytes
	}
	return c
}

// Fsync times appends of cfg.Bytes bytes to a new file in dir, each followed by
// fdatasync (fsync where fdatasync does not exist), as a Raft log append does.
// The file is removed afterwards. Errors: file I/O errors, ErrNoSamples, ctx.Err().
func Fsync(ctx context.Context, dir string, cfg Config) (latency.Summary, error) {
	cfg = cfg.withDefaults(DefaultRecordBytes)
	f, err := os.CreateTemp(dir, "ticketbench-fsync-*")
	if err != nil {
		return latency.Summary{}, fmt.Errorf("floor: fsync file: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()

	rec := make([]byte, cfg.Bytes)
	for i := range rec {
		rec[i] = byte('a' + i%26)
	}
	return measure(ctx, cfg, func(int) error {
		if _, err := f.Write(rec); err != nil {
			return fmt.Errorf("floor: append: %w", err)
		}
		if err := datasync(f); err != nil {
			return fmt.Errorf("floor: fdatasync: %w", err)
		}
		return nil
	})
}

// RTT times ping-pong exchanges of cfg.Bytes-byte messages over one TCP
// connection on 127.0.0.1 (Nagle off, as Go sets by default). Errors: socket
// errors, ErrNoSamples, ctx.Err().
func RTT(ctx context.Context, cfg Config) (latency.Summary, error) {
	cfg = cfg.withDefaults(DefaultMessageBytes)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return latency.Summary{}, fmt.Errorf("floor: listen: %w", err)
	}
	defer ln.Close()
	echoDone := make(chan error, 1)
	go func() { echoDone <- echo(ln, cfg.Bytes) }()

	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		return latency.Summary{}, fmt.Errorf("floor: dial: %w", err)
	}
	ping := make([]byte, cfg.Bytes)
	pong := make([]byte, cfg.Bytes)
	sum, runErr := measure(ctx, cfg, func(i int) error {
		ping[0] = byte(i)
		if _, err := conn.Write(ping); err != nil {
			return err
		}
		_, err := io.ReadFull(conn, pong)
		return err
	})
	conn.Close()
	if err := <-echoDone; err != nil && runErr == nil {
		runErr = err
	}
	switch {
	case errors.Is(runErr, ErrNoSamples):
		return latency.Summary{}, runErr
	case runErr != nil:
		return latency.Summary{}, fmt.Errorf("floor: ping-pong: %w", runErr)
	}
	return sum, nil
}

// echo serves one connection, returning every message to its sender, until
// the sender closes it.
func echo(ln net.Listener, size int) error {
	conn, err := ln.Accept()
	if err != nil {
		return err
	}
	defer conn.Close()
	buf := make([]byte, size)
	for {
		if _, err := io.ReadFull(conn, buf); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if _, err := conn.Write(buf); err != nil {
			return err
		}
	}
}

// measure calls op(i) for i = 0, 1, 2, ... until cfg.Samples calls have been
// made or cfg.Budget has passed, times each call, and summarizes the times. It
// stops at the first error of ctx or of op and returns that error as it is;
// ErrNoSamples if the budget ran out before the first call.
func measure(ctx context.Context, cfg Config, op func(i int) error) (latency.Summary, error) {
	h := latency.New()
	deadline := time.Now().Add(cfg.Budget)
	for i := 0; i < cfg.Samples && time.Now().Before(deadline); i++ {
		if err := ctx.Err(); err != nil {
			return latency.Summary{}, err
		}
		t0 := time.Now()
		if err := op(i); err != nil {
			return latency.Summary{}, err
		}
		h.Record(time.Since(t0))
	}
	if h.Count() == 0 {
		return latency.Summary{}, ErrNoSamples
	}
	return h.Summarize(), nil
}
