package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ticketd/ticketd/sdk"
)

// exitLeaseLost is the exit code of "lock run", "elect" and "lock acquire
// --hold" when the lease was lost while held (the command, if any, was
// terminated).
const exitLeaseLost = 5

// releaseTimeout bounds the release after a held lock's command exits.
const releaseTimeout = 5 * time.Second

// errLeaseLost: the lease of a held lock (lock run, elect, --hold) was lost.
var errLeaseLost = errors.New("lease lost")

// codeError carries a process exit code chosen by a command: the status of
// the command that "lock run" ran (printed by nobody), or exitLeaseLost.
type codeError struct {
	code int
	err  error // nil: exit silently with code
}

// Error implements error.
func (e *codeError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

// Unwrap returns the cause.
func (e *codeError) Unwrap() error { return e.err }

// held is what runHeld needs of a held lock (an sdk.Lease, an sdk.Leadership).
type held interface {
	Done() <-chan struct{}
	Err() error
}

// newRunCmd builds "lock run KEY -- CMD ARGS...".
func newRunCmd(g *globals) *cobra.Command {
	var (
		ttl, grace time.Duration
		wait       bool
		owner      string
		hf         holdFlags
	)
	cmd := &cobra.Command{
		Use:   "run KEY -- CMD [ARGS...]",
		Short: "Run CMD while holding KEY (renewed in the background), then release it",
		Long: `Acquire KEY (waiting in its queue with --wait, up to --timeout), keep renewing
its lease, and run CMD with TICKETD_KEY and TICKETD_TOKEN (the fencing token)
in its environment. SIGINT and SIGTERM are passed on to CMD. When CMD exits
the lock is released and ticketctl exits with CMD's status (128+N when a
signal N ended it). If the lease is lost while CMD runs, CMD gets SIGTERM,
then SIGKILL after --kill-grace, and ticketctl exits 5 (consul lock's
behaviour). Exit 2: the key is held and --wait was not given; exit 8: it was
still held when --wait ran out of --timeout.

--limit N holds one of N slots of a counting semaphore on KEY instead of the
whole key: at most N copies of CMD run at once cluster-wide (with --wait the
others queue, first in, first out). --shared holds KEY shared: any number of
shared runs at once, never beside an exclusive one (readers-writer).`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 {
				return errUsage("ticketctl lock run KEY [flags] -- CMD [ARGS...]")
			}
			mode, err := hf.options()
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			defer c.Close()
			lease, err := g.lockLease(cmd, c, args[0], ttl, wait, owner, mode)
			if err != nil {
				return err
			}
			env := []string{"TICKETD_KEY=" + lease.Key(), "TICKETD_TOKEN=" + strconv.FormatUint(lease.Token(), 10), bearerEnv + "=" + g.token}
			return runHeld(cmd, lease, lease.Unlock, env, args[1:], grace)
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 10*time.Second, "lease length (whole milliseconds); renewed in the background")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait in the key's queue until granted or --timeout")
	cmd.Flags().DurationVar(&grace, "kill-grace", 10*time.Second, "after a lost lease, time between SIGTERM and SIGKILL to CMD")
	cmd.Flags().StringVar(&owner, "owner", "", "owner id (≤ 128 bytes; default: unique per call)")
	hf.add(cmd, false)
	return cmd
}

// lockLease acquires key with an auto-renewing lease of its own of ttl
// (waiting when wait), held as mode says (holdFlags.options), the
// acquisition bounded by --timeout.
func (g *globals) lockLease(cmd *cobra.Command, c *sdk.Client, key string, ttl time.Duration, wait bool, owner string, mode []sdk.AcquireOption) (*sdk.Lease, error) {
	ctx := cmd.Context()
	if g.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.timeout)
		defer cancel()
	}
	if ttl <= 0 {
		return nil, usagef("--ttl must be positive")
	}
	opts := append([]sdk.AcquireOption(nil), mode...)
	if !wait {
		if owner != "" {
			opts = append(opts, sdk.WithOwner(owner))
		}
		lease, err := c.TryLock(ctx, key, ttl, opts...)
		return lease, ttlHint(err)
	}
	owner = waitOwner(owner)
	opts = append(opts, sdk.WithOwner(owner))
	lease, err := c.Lock(ctx, key, ttl, opts...)
	if err != nil {
		err = g.settleWait(cmd.Context(), c, key, owner, err, func(ctx context.Context) error {
			var rerr error
			lease, rerr = c.TryLock(ctx, key, ttl, opts...)
			return rerr
		})
	}
	return lease, ttlHint(err)
}

// runHeld runs argv while h is held, with env added to its environment,
// forwarding SIGINT and SIGTERM. When the command exits, release ends the
// hold and the command's status becomes ticketctl's (an *codeError). When h
// ends first (lease lost), the command gets SIGTERM, then SIGKILL after
// grace, and the error says the lease was lost (exit 5).
func runHeld(cmd *cobra.Command, h held, release func(context.Context) error, env, argv []string, grace time.Duration) error {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	child := exec.Command(argv[0], argv[1:]...)
	child.Env = append(os.Environ(), env...)
	child.Stdin, child.Stdout, child.Stderr = os.Stdin, cmd.OutOrStdout(), cmd.ErrOrStderr()
	if err := child.Start(); err != nil {
		rctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		defer cancel()
		return errors.Join(fmt.Errorf("start %s: %w", argv[0], err), release(rctx))
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()

	var (
		lost    error
		killAt  <-chan time.Time
		waitErr error
	)
	done := h.Done()
loop:
	for {
		select {
		case sig := <-sigs:
			_ = child.Process.Signal(sig)
		case <-done:
			done = nil
			lost = h.Err()
			fmt.Fprintf(cmd.ErrOrStderr(), "ticketctl: %v; sending SIGTERM to %s (SIGKILL in %v)\n", lost, argv[0], grace)
			_ = child.Process.Signal(syscall.SIGTERM)
			killAt = time.After(grace)
		case <-killAt:
			fmt.Fprintf(cmd.ErrOrStderr(), "ticketctl: %s still running after %v; sending SIGKILL\n", argv[0], grace)
			_ = child.Process.Kill()
		case waitErr = <-exited:
			break loop
		}
	}
	if lost != nil {
		return &codeError{code: exitLeaseLost, err: fmt.Errorf("%w while %s ran; it was terminated: %w", errLeaseLost, argv[0], lost)}
	}
	rctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if err := release(rctx); err != nil && !errors.Is(err, sdk.ErrLeaseLost) {
		fmt.Fprintf(cmd.ErrOrStderr(), "ticketctl: release: %v\n", err)
	}
	return childStatus(waitErr)
}

// childStatus turns a child's Wait error into ticketd's exit: nil for status
// 0, else an *codeError with the child's status (128+N for signal N).
func childStatus(waitErr error) error {
	if waitErr == nil {
		return nil
	}
	var ee *exec.ExitError
	if !errors.As(waitErr, &ee) {
		return waitErr
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return &codeError{code: 128 + int(ws.Signal())}
	}
	return &codeError{code: ee.ExitCode()}
}

// holdLease holds lease until the command's ctx ends (Ctrl-C) or the lease
// is lost, then releases it ("lock acquire --hold"). The token has been
// printed already.
func holdLease(cmd *cobra.Command, lease *sdk.Lease) error {
	select {
	case <-cmd.Context().Done():
		rctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		defer cancel()
		if err := lease.Unlock(rctx); err != nil && !errors.Is(err, sdk.ErrLeaseLost) {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "released %q token %d\n", lease.Key(), lease.Token())
		return nil
	case <-lease.Done():
		return &codeError{code: exitLeaseLost, err: fmt.Errorf("%q token %d: %w: %w", lease.Key(), lease.Token(), errLeaseLost, lease.Err())}
	}
}

// holdAcquire is "lock acquire KEY --hold": acquire with an auto-renewing
// lease, print the grant (text or JSON), then hold it (holdLease).
func (g *globals) holdAcquire(cmd *cobra.Command, key string, ttl time.Duration, wait bool, owner string, hf holdFlags, mode []sdk.AcquireOption) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	defer c.Close()
	lease, err := g.lockLease(cmd, c, key, ttl, wait, owner, mode)
	if err != nil {
		return err
	}
	r := grantJSON{Key: lease.Key(), Token: lease.Token(), TTLMs: msOf(lease.TTL()), Owner: lease.Owner()}
	if err := g.print(r, func(w io.Writer, v any) {
		grantText(w, v.(grantJSON), hf)
		fmt.Fprintln(w, "holding until Ctrl-C")
	}); err != nil {
		return err
	}
	return holdLease(cmd, lease)
}
