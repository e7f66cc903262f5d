package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ticketd/ticketd/sdk"
)

// lockJSON is what "lock get" prints: GetLockResponse in the API's JSON
// (protojson: lowerCamelCase names, 64-bit integers as strings, durations
// in milliseconds) and the key asked about.
type lockJSON struct {
	Key         string `json:"key"`
	Held        bool   `json:"held"`
	Token       uint64 `json:"token,string"`
	TTLMs       int64  `json:"leaseMs,string"`
	RemainingMs int64  `json:"remainingMs,string"`
	Owner       string `json:"owner"`
}

// value is what -o value prints: the holder's token, nothing for a free key.
func (l lockJSON) value() string {
	if !l.Held {
		return ""
	}
	return strconv.FormatUint(l.Token, 10)
}

// lockOf converts an SDK LockInfo for printing.
func lockOf(l sdk.LockInfo) lockJSON {
	return lockJSON{Key: l.Key, Held: l.Held, Token: l.Token, TTLMs: msOf(l.TTL), RemainingMs: msOf(l.Remaining), Owner: l.Owner}
}

// newLockCmd builds "lock" and its subcommands.
func newLockCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "lock", Short: "Acquire, renew, release and inspect locks"}
	cmd.AddCommand(newAcquireCmd(g), newRenewCmd(g), newReleaseCmd(g), newGetCmd(g), newListCmd(g), newCheckCmd(g), newRunCmd(g))
	return cmd
}

// grantJSON is what "lock acquire" prints: AcquireResponse in the API's
// JSON, with the request's key and owner.
type grantJSON struct {
	Key   string `json:"key"`
	Token uint64 `json:"token,string"`
	TTLMs int64  `json:"leaseMs,string"`
	Owner string `json:"owner"`
}

// value is what -o value prints: the fencing token.
func (r grantJSON) value() string { return strconv.FormatUint(r.Token, 10) }

// newAcquireCmd builds "lock acquire KEY".
func newAcquireCmd(g *globals) *cobra.Command {
	var (
		ttl   time.Duration
		wait  bool
		owner string
		hold  bool
	)
	cmd := &cobra.Command{
		Use:   "acquire KEY",
		Short: "Acquire KEY for --ttl and print its fencing token (no background renewal)",
		Long: `Acquire KEY for a lease of --ttl and print the fencing token. Without --wait it
fails at once (exit 2) when the key is held; with --wait it waits in the key's
FIFO queue until granted or --timeout, and exits 8 "still held after
--timeout" when that runs out. ticketctl does not renew the lease: use
"lock renew" before the TTL runs out. With -o value it prints the bare token:
tok=$(ticketctl -o value lock acquire KEY --ttl 60s). Retrying with the same --owner returns
the same grant, so a retry after an unknown outcome (exit 4) is safe.

With --hold it prints the token, then keeps renewing the lease until Ctrl-C
(then releases the lock, exit 0) or until the lease is lost (exit 5): a lock
held from a terminal for manual maintenance.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if hold {
				return g.holdAcquire(cmd, args[0], ttl, wait, owner)
			}
			opts := []sdk.AcquireOption{}
			if wait {
				owner = waitOwner(owner)
				opts = append(opts, sdk.WithWait())
			}
			if owner != "" {
				opts = append(opts, sdk.WithOwner(owner))
			}
			return g.do(cmd, func(ctx context.Context, c *sdk.Client) (any, error) {
				gr, err := c.Acquire(ctx, args[0], ttl, opts...)
				if err != nil && wait {
					err = g.settleWait(cmd.Context(), c, args[0], owner, err, func(ctx context.Context) error {
						var rerr error
						gr, rerr = c.Acquire(ctx, args[0], ttl, sdk.WithOwner(owner))
						return rerr
					})
				}
				if err != nil {
					return nil, ttlHint(err)
				}
				return grantJSON{Key: gr.Key, Token: gr.Token, TTLMs: msOf(gr.TTL), Owner: gr.Owner}, nil
			}, func(w io.Writer, v any) {
				r := v.(grantJSON)
				fmt.Fprintf(w, "acquired %q token %d ttl %v owner %q\n", r.Key, r.Token, durationOf(r.TTLMs), r.Owner)
			})
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 10*time.Second, "lease length (whole milliseconds)")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait in the key's queue until granted or --timeout")
	cmd.Flags().StringVar(&owner, "owner", "", "owner id (≤ 128 bytes); a retry with the same owner gets the same grant (default: unique per call)")
	cmd.Flags().BoolVar(&hold, "hold", false, "keep renewing until Ctrl-C or lease loss, then release")
	return cmd
}

// renewJSON is what "lock renew" prints: RenewResponse in the API's JSON,
// with the request's key and token.
type renewJSON struct {
	Key   string `json:"key"`
	Token uint64 `json:"token,string"`
	TTLMs int64  `json:"leaseMs,string"`
}

// value is what -o value prints: the token, unchanged, for chaining.
func (r renewJSON) value() string { return strconv.FormatUint(r.Token, 10) }

// newRenewCmd builds "lock renew KEY TOKEN".
func newRenewCmd(g *globals) *cobra.Command {
	return keyTokenCmd(g, "renew KEY TOKEN", "Extend the lease of the lock on KEY held with TOKEN by its TTL",
		func(ctx context.Context, c *sdk.Client, key string, tok uint64) (any, error) {
			ttl, err := c.Renew(ctx, key, tok)
			if err != nil {
				return nil, err
			}
			return renewJSON{Key: key, Token: tok, TTLMs: msOf(ttl)}, nil
		}, func(w io.Writer, v any) {
			r := v.(renewJSON)
			fmt.Fprintf(w, "renewed %q token %d for %v\n", r.Key, r.Token, durationOf(r.TTLMs))
		})
}

// releaseJSON is what "lock release" prints: the request's key, token and
// force, and released (always true: a failure is an error).
type releaseJSON struct {
	Key      string `json:"key"`
	Token    uint64 `json:"token,string"`
	Released bool   `json:"released"`
	Forced   bool   `json:"force"`
}

// value is what -o value prints: nothing (the exit status says it all).
func (releaseJSON) value() string { return "" }

// newReleaseCmd builds "lock release KEY TOKEN" and "lock release KEY --force".
func newReleaseCmd(g *globals) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "release KEY TOKEN | release KEY --force",
		Short: "Release the lock on KEY held with TOKEN (a lock granted since is left alone); --force: whatever lock KEY holds (admin)",
		Args: func(cmd *cobra.Command, args []string) error {
			if force {
				return cobra.ExactArgs(1)(cmd, args)
			}
			return cobra.ExactArgs(2)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var tok uint64
			if !force {
				var err error
				if tok, err = parseToken(args[1]); err != nil {
					return err
				}
			}
			return g.do(cmd, func(ctx context.Context, c *sdk.Client) (any, error) {
				if force {
					if err := c.ForceRelease(ctx, args[0]); err != nil {
						return nil, err
					}
					return releaseJSON{Key: args[0], Released: true, Forced: true}, nil
				}
				if err := c.Release(ctx, args[0], tok); err != nil {
					return nil, err
				}
				return releaseJSON{Key: args[0], Token: tok, Released: true}, nil
			}, func(w io.Writer, v any) {
				r := v.(releaseJSON)
				if r.Forced {
					fmt.Fprintf(w, "force-released %q\n", r.Key)
					return
				}
				fmt.Fprintf(w, "released %q token %d\n", r.Key, r.Token)
			})
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "release whatever lock KEY holds, whoever holds it (needs the admin permission; audited)")
	return cmd
}

// newGetCmd builds "lock get KEY [--stale]".
func newGetCmd(g *globals) *cobra.Command {
	var stale bool
	cmd := &cobra.Command{
		Use:   "get KEY",
		Short: "Show the holder of KEY (linearizable unless --stale)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.do(cmd, func(ctx context.Context, c *sdk.Client) (any, error) {
				info, err := c.GetLock(ctx, args[0], readOptions(stale)...)
				if err != nil {
					return nil, err
				}
				return lockOf(info), nil
			}, func(w io.Writer, v any) {
				l := v.(lockJSON)
				if !l.Held {
					fmt.Fprintf(w, "%q is free\n", l.Key)
					return
				}
				fmt.Fprintf(w, "%q held: token %d ttl %v remaining %v owner %q\n", l.Key, l.Token,
					durationOf(l.TTLMs), remainingOf(l.RemainingMs), l.Owner)
			})
		},
	}
	cmd.Flags().BoolVar(&stale, "stale", false, "let any node answer from local state (may lag the leader)")
	return cmd
}

// listLockJSON is one lock of "lock list": the API's Lock message in its JSON.
type listLockJSON struct {
	Key         string `json:"key"`
	Token       uint64 `json:"token,string"`
	TTLMs       int64  `json:"leaseMs,string"`
	RemainingMs int64  `json:"remainingMs,string"`
	Owner       string `json:"owner"`
}

// listJSON is what "lock list" prints: ListLocksResponse in the API's JSON,
// the held locks in key order (every page).
type listJSON struct {
	Locks []listLockJSON `json:"locks"`
}

// value is what -o value prints: the held keys, one per line.
func (l listJSON) value() string {
	keys := make([]string, 0, len(l.Locks))
	for _, k := range l.Locks {
		keys = append(keys, k.Key)
	}
	return strings.Join(keys, "\n")
}

// newListCmd builds "lock list [--prefix P] [--stale]".
func newListCmd(g *globals) *cobra.Command {
	var (
		prefix string
		stale  bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List held locks (optionally under --prefix), in key order",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.do(cmd, func(ctx context.Context, c *sdk.Client) (any, error) {
				locks, err := c.ListLocks(ctx, prefix, readOptions(stale)...)
				if err != nil {
					return nil, err
				}
				out := listJSON{Locks: []listLockJSON{}}
				for _, l := range locks {
					out.Locks = append(out.Locks, listLockJSON{Key: l.Key, Token: l.Token, TTLMs: msOf(l.TTL),
						RemainingMs: msOf(l.Remaining), Owner: l.Owner})
				}
				return out, nil
			}, func(w io.Writer, v any) {
				tw := newTable(w, "KEY\tTOKEN\tTTL\tREMAINING\tOWNER")
				for _, l := range v.(listJSON).Locks {
					fmt.Fprintf(tw, "%s\t%d\t%v\t%v\t%s\n", l.Key, l.Token,
						durationOf(l.TTLMs), remainingOf(l.RemainingMs), l.Owner)
				}
				_ = tw.Flush()
			})
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", "", "only keys starting with this prefix")
	cmd.Flags().BoolVar(&stale, "stale", false, "let any node answer from local state (may lag the leader)")
	return cmd
}

// checkJSON is what "lock check" prints, valid or not: CheckTokenResponse
// in the API's JSON, with the request's key and token. CurrentToken is the
// holder's token, "0" when the key is free.
type checkJSON struct {
	Key          string `json:"key"`
	Token        uint64 `json:"token,string"`
	Valid        bool   `json:"valid"`
	CurrentToken uint64 `json:"currentToken,string"`
}

// value is what -o value prints: the current holder's token, nothing for a
// free key (validity is the exit status).
func (r checkJSON) value() string {
	if r.CurrentToken == 0 {
		return ""
	}
	return strconv.FormatUint(r.CurrentToken, 10)
}

// checkText renders a "lock check" result for people: a free key says so
// instead of naming token 0 (issue 19).
func checkText(r checkJSON) string {
	switch {
	case r.Valid:
		return fmt.Sprintf("token %d is the current holder of %q", r.Token, r.Key)
	case r.CurrentToken == 0:
		return fmt.Sprintf("token %d is not the holder of %q: the key is free", r.Token, r.Key)
	}
	return fmt.Sprintf("token %d is not the holder of %q: token %d holds it", r.Token, r.Key, r.CurrentToken)
}

// newCheckCmd builds "lock check KEY TOKEN".
func newCheckCmd(g *globals) *cobra.Command {
	return keyTokenCmd(g, "check KEY TOKEN", "Tell whether TOKEN is the current holder of KEY (exit 3 if not)",
		func(ctx context.Context, c *sdk.Client, key string, tok uint64) (any, error) {
			valid, cur, err := c.Check(ctx, key, tok)
			if err != nil {
				return nil, err
			}
			r := checkJSON{Key: key, Token: tok, Valid: valid, CurrentToken: cur}
			if !valid {
				return r, &checkError{text: checkText(r)}
			}
			return r, nil
		}, func(w io.Writer, v any) {
			if r := v.(checkJSON); r.Valid {
				fmt.Fprintln(w, checkText(r))
			}
		})
}

// keyTokenCmd builds the command "use" (of the form "VERB KEY TOKEN"): it
// checks that TOKEN is a positive integer (a usage error, exit 64, before any
// request), then runs fn with KEY and the token through g.do, which prints
// fn's result with text or as JSON.
func keyTokenCmd(g *globals, use, short string, fn func(ctx context.Context, c *sdk.Client, key string, tok uint64) (any, error), text func(w io.Writer, v any)) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			tok, err := parseToken(args[1])
			if err != nil {
				return err
			}
			return g.do(cmd, func(ctx context.Context, c *sdk.Client) (any, error) {
				return fn(ctx, c, args[0], tok)
			}, text)
		},
	}
}

// readOptions returns the SDK read options of the --stale flag: none for a
// linearizable read, WithStale for a read any node answers from local state.
func readOptions(stale bool) []sdk.ReadOption {
	if stale {
		return []sdk.ReadOption{sdk.WithStale()}
	}
	return nil
}

// checkError is "lock check"'s answer that the token is not the current
// holder: exit 3, with the sentence checkText made as its message.
type checkError struct{ text string }

// Error implements error.
func (e *checkError) Error() string { return e.text }

// Is reports whether target is errInvalidToken.
func (e *checkError) Is(target error) bool { return target == errInvalidToken }
