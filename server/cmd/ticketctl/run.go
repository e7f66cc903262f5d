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
	"strings"
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
		ttl   time.Duration
		wait  bool
		owner string
		hf    holdFlags
		cf    childFlags
	)
	cmd := &cobra.Command{
		Use:   "run KEY -- CMD [ARGS...]",
		Short: "Run CMD while holding KEY (renewed in the background), then release it",
		Long: `Acquire KEY (waiting in its queue with --wait, up to --timeout), keep renewing
its lease, and run CMD with TICKETD_KEY (the key) and TICKETD_FENCING_TOKEN
(the lock's fencing token) in its environment. When CMD exits the lock is
released and ticketctl exits with CMD's status. If the lease is lost while
CMD runs, CMD's process group is terminated and ticketctl exits 5 (consul
lock's behaviour). Exit 2: the key is held and --wait was not given; exit 8:
it was still held when --wait ran out of --timeout.

--limit N holds one of N slots of a counting semaphore on KEY instead of the
whole key: at most N copies of CMD run at once cluster-wide (with --wait the
others queue, first in, first out). --shared holds KEY shared: any number of
shared runs at once, never beside an exclusive one (readers-writer).

` + childEnvHelp,
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
			env := childEnv(os.Environ(), []string{"TICKETD_KEY=" + lease.Key(), "TICKETD_FENCING_TOKEN=" + strconv.FormatUint(lease.Token(), 10)}, g.token, cf.passToken)
			return runHeld(cmd, lease, lease.Unlock, env, args[1:], cf.killTimeout)
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 10*time.Second, "lease length (whole milliseconds); renewed in the background")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait in the key's queue until granted or --timeout")
	cmd.Flags().StringVar(&owner, "owner", "", "owner id (≤ 128 bytes; default: unique per call)")
	hf.add(cmd, false)
	cf.add(cmd, "the lease is lost")
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

// childFlags are the flags of the commands that run a command under a hold
// ("lock run", "elect", "session run").
type childFlags struct {
	killTimeout time.Duration
	passToken   bool
}

// add registers --kill-timeout and --pass-token on cmd (and --kill-grace,
// the former name of --kill-timeout, hidden).
func (f *childFlags) add(cmd *cobra.Command, lost string) {
	cmd.Flags().DurationVar(&f.killTimeout, "kill-timeout", 10*time.Second,
		"when "+lost+" or ticketctl is stopped, time between SIGTERM to CMD's process group and SIGKILL")
	cmd.Flags().DurationVar(&f.killTimeout, "kill-grace", 10*time.Second, "former name of --kill-timeout")
	_ = cmd.Flags().MarkDeprecated("kill-grace", "use --kill-timeout")
	cmd.Flags().BoolVar(&f.passToken, "pass-token", false,
		"give CMD ticketctl's bearer token as TICKETD_TOKEN (by default CMD's environment has no TICKETD_TOKEN)")
}

// childEnvHelp documents the process group and the exit statuses of the
// commands that run a command under a hold, for their --help (and
// docs/operations.md, "Running a command under a lock").
const childEnvHelp = `CMD runs in a process group of its own: everything it starts (a shell's
children, a pipeline) is signalled with it (run from a terminal, that group
gets the terminal's foreground while CMD runs, as a shell's job does). When the hold ends under it
(lease or session lost, exit 5) the group gets SIGTERM, then SIGKILL after
--kill-timeout. When ticketctl gets SIGINT or SIGTERM it passes the signal
to the group (SIGKILL after --kill-timeout), releases the hold once the group
is gone and exits 128+N (130 for SIGINT, 143 for SIGTERM). When CMD exits on
its own, whatever it left running in its group gets the same SIGTERM, then
SIGKILL, before the hold is released, and ticketctl exits with CMD's status
(128+N when signal N ended it). A process that leaves the group (setsid)
escapes all this.

TICKETD_TOKEN in CMD's environment is the bearer token, and only with
--pass-token (ticketctl's own, from --token or TICKETD_TOKEN); without it
CMD gets no TICKETD_TOKEN.`

// childEnv returns CMD's environment: base without TICKETD_TOKEN (and the
// former TICKETD_BEARER_TOKEN), then add, then TICKETD_TOKEN=token when
// pass is set and token is not empty (docs/security.md: a bearer token
// reaches other processes only when asked).
func childEnv(base, add []string, token string, pass bool) []string {
	env := make([]string, 0, len(base)+len(add)+1)
	for _, kv := range base {
		if strings.HasPrefix(kv, "TICKETD_TOKEN=") || strings.HasPrefix(kv, "TICKETD_BEARER_TOKEN=") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, add...)
	if pass && token != "" {
		env = append(env, "TICKETD_TOKEN="+token)
	}
	return env
}

// runHeld runs argv in a process group of its own (procgroup.go) while h is
// held, with env as its whole environment (childEnv). The exit it returns:
// CMD's status when CMD exits on its own (nil for 0, else an *codeError);
// exitLeaseLost when h ends first (the group got SIGTERM, then SIGKILL after
// killTimeout); 128+N when ticketctl got signal N (SIGINT, SIGTERM), which
// it passed to the group, SIGKILL following after killTimeout. In every
// case the group is gone (or was sent SIGKILL) before release ends the hold.
func runHeld(cmd *cobra.Command, h held, release func(context.Context) error, env, argv []string, killTimeout time.Duration) error {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	stderr := cmd.ErrOrStderr()

	child := exec.Command(argv[0], argv[1:]...)
	child.Env = env
	child.Stdin, child.Stdout, child.Stderr = os.Stdin, cmd.OutOrStdout(), stderr
	giveBack, err := startGroup(child)
	if err != nil {
		giveBack()
		rctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		defer cancel()
		return errors.Join(fmt.Errorf("start %s: %w", argv[0], err), release(rctx))
	}
	pid := child.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()

	var (
		lost    error
		stopped syscall.Signal // the signal that stopped ticketctl, 0 if none
		killAt  <-chan time.Time
		waitErr error
	)
	done := h.Done()
loop:
	for {
		select {
		case sig := <-sigs:
			s := sig.(syscall.Signal)
			if stopped == 0 && lost == nil {
				stopped = s
				fmt.Fprintf(stderr, "ticketctl: got %s; sending it to %s's process group (SIGKILL in %v)\n", signalName(s), argv[0], killTimeout)
				killAt = time.After(killTimeout)
			}
			_ = signalGroup(pid, s)
			_ = signalGroup(pid, syscall.SIGCONT) // a member stopped by job control acts on it
		case <-done:
			done = nil
			if stopped != 0 {
				continue // already stopping; the release will find the hold ended
			}
			lost = h.Err()
			fmt.Fprintf(stderr, "ticketctl: %v; sending SIGTERM to %s's process group (SIGKILL in %v)\n", lost, argv[0], killTimeout)
			terminateGroup(pid)
			killAt = time.After(killTimeout)
		case <-killAt:
			fmt.Fprintf(stderr, "ticketctl: %s still running after %v; sending SIGKILL to its process group\n", argv[0], killTimeout)
			_ = signalGroup(pid, syscall.SIGKILL)
		case waitErr = <-exited:
			break loop
		}
	}
	giveBack()
	gone := reapGroup(pid, killTimeout, func(sig syscall.Signal) {
		fmt.Fprintf(stderr, "ticketctl: %s exited leaving processes in its group; sending %v\n", argv[0], sig)
	})
	if !gone {
		fmt.Fprintf(stderr, "ticketctl: processes of %s's group %d remain after SIGKILL\n", argv[0], pid)
	}
	if lost != nil {
		return &codeError{code: exitLeaseLost, err: fmt.Errorf("%w while %s ran; its process group was terminated: %w", errLeaseLost, argv[0], lost)}
	}
	rctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if err := release(rctx); err != nil && !errors.Is(err, sdk.ErrLeaseLost) {
		fmt.Fprintf(stderr, "ticketctl: release: %v\n", err)
	}
	if stopped != 0 {
		return &codeError{code: 128 + int(stopped), err: fmt.Errorf("stopped by %s: %s's process group was terminated and the hold released", signalName(stopped), argv[0])}
	}
	return childStatus(waitErr)
}

// signalName names the signals ticketctl passes on as a shell does
// (SIGINT, SIGTERM); others by their description.
func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
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
