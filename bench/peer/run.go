package peer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/ticketd/ticketd/bench/cputime"
	"github.com/ticketd/ticketd/bench/load"
)

// Config is what one peer run measures; it becomes the peer's flags.
type Config struct {
	// Concurrency lists the client counts, each measured once in order.
	Concurrency []int
	// Duration is each measurement's window, Warmup the unrecorded run before it.
	Duration, Warmup time.Duration
	// Mode and Rate are as in load.Config.
	Mode load.Mode
	Rate float64
	// DataDir is where the peer makes its temporary data directory (the same
	// disk as ticketd's clusters, for a fair fsync); empty means os.TempDir().
	DataDir string
	// Workload is the peer's workload: "" or "lock" (concurrency.Mutex),
	// "keepalive" (LeaseKeepAlive) or "handoff"; see bench/etcdpeer.
	Workload string
	// Keys is how many keys are attached to each worker's lease in the
	// keepalive workload (the peer's -keys); 0 for none.
	Keys int
	// OnLevel, if set, is called when the peer starts measuring a level, in
	// level order, from a goroutine of Run's (not the caller's).
	OnLevel func(concurrency int)
	// Stderr, if set, receives the peer's stderr lines other than progress,
	// written from that same goroutine.
	Stderr io.Writer
}

// Args returns the command-line flags of bench/etcdpeer for c.
func (c Config) Args() []string {
	args := []string{
		"-concurrency", load.FormatLevels(c.Concurrency),
		"-duration", c.Duration.String(),
		"-warmup", c.Warmup.String(),
	}
	if c.Mode != "" {
		args = append(args, "-mode", string(c.Mode))
	}
	if c.Rate > 0 {
		args = append(args, "-rate", strconv.FormatFloat(c.Rate, 'f', -1, 64))
	}
	if c.DataDir != "" {
		args = append(args, "-dir", c.DataDir)
	}
	if c.Workload != "" {
		args = append(args, "-workload", c.Workload)
	}
	if c.Keys > 0 {
		args = append(args, "-keys", strconv.Itoa(c.Keys))
	}
	return args
}

// Run starts the peer binary bin with cfg, waits for it and returns its
// Output. Errors: ErrRun (with the peer's stderr tail) or ctx.Err().
func Run(ctx context.Context, bin string, cfg Config) (Output, error) {
	cmd := exec.CommandContext(ctx, bin, cfg.Args()...)
	// On cancel, interrupt the peer so it stops its members and removes its
	// data; kill it only if it has not exited 10 s later.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return Output{}, fmt.Errorf("%w: %v", ErrRun, err)
	}
	if err := cmd.Start(); err != nil {
		return Output{}, fmt.Errorf("%w: start %s: %v", ErrRun, bin, err)
	}
	tail := readStderr(stderr, cfg)
	err = cmd.Wait()
	lines := <-tail
	if ctx.Err() != nil {
		return Output{}, ctx.Err()
	}
	if err != nil {
		return Output{}, fmt.Errorf("%w: %v: %s", ErrRun, err, strings.Join(lines, "\n"))
	}
	var out Output
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		return Output{}, fmt.Errorf("%w: decode output: %v", ErrRun, err)
	}
	out.CPU = cputime.Of(cmd.ProcessState)
	if len(out.Results) != len(cfg.Concurrency) {
		return Output{}, fmt.Errorf("%w: %d results for %d levels", ErrRun, len(out.Results), len(cfg.Concurrency))
	}
	return out, nil
}

// readStderr forwards progress to cfg.OnLevel and other lines to cfg.Stderr,
// and sends the last lines (for error messages) when stderr closes.
func readStderr(r io.Reader, cfg Config) <-chan []string {
	done := make(chan []string, 1)
	go func() {
		var tail []string
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, ProgressPrefix); ok {
				if n, err := strconv.Atoi(strings.TrimSpace(rest)); err == nil && cfg.OnLevel != nil {
					cfg.OnLevel(n)
				}
				continue
			}
			if cfg.Stderr != nil {
				fmt.Fprintln(cfg.Stderr, line)
			}
			tail = append(tail, line)
			if len(tail) > 20 {
				tail = tail[1:]
			}
		}
		done <- tail
	}()
	return done
}
