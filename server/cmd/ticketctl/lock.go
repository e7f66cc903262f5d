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
// in milliseconds, enums by name, zero-valued new fields left out) and the
// key asked about. Token, TTLMs, RemainingMs and Owner describe an
// exclusive lock's holder; Holders lists every holder (shared keys and
// semaphores have several).
type lockJSON struct {
	Key         string       `json:"key"`
	Held        bool         `json:"held"`
	Token       uint64       `json:"token,string"`
	TTLMs       int64        `json:"leaseMs,string"`
	RemainingMs int64        `json:"remainingMs,string"`
	Owner       string       `json:"owner"`
	Holders     []holderJSON `json:"holders,omitempty"`
	Mode        string       `json:"mode,omitempty"`
	Limit       uint32       `json:"limit,omitempty"`
}

// holderJSON is one holder: the API's Holder message in its JSON.
type holderJSON struct {
	Token       uint64 `json:"token,string"`
	Owner       string `json:"owner"`
	TTLMs       int64  `json:"leaseMs,string"`
	RemainingMs int64  `json:"remainingMs,string"`
	Session     uint64 `json:"session,omitempty,string"`
}

// value is what -o value prints: the holders' tokens, one per line,
// nothing for a free key.
func (l lockJSON) value() string {
	if !l.Held {
		return ""
	}
	if l.Token != 0 || len(l.Holders) == 0 {
		return strconv.FormatUint(l.Token, 10)
	}
	toks := make([]string, 0, len(l.Holders))
	for _, h := range l.Holders {
		toks = append(toks, strconv.FormatUint(h.Token, 10))
	}
	return strings.Join(toks, "\n")
}

// lockOf converts an SDK LockInfo for printing.
func lockOf(l sdk.LockInfo) lockJSON {
	return lockJSON{Key: l.Key, Held: l.Held, Token: l.Token, TTLMs: msOf(l.TTL), RemainingMs: msOf(l.Remaining), Owner: l.Owner,
		Holders: holdersOf(l), Mode: modeName(l.Mode), Limit: l.Limit}
}

// holdersOf converts every holder of l.
func holdersOf(l sdk.LockInfo) []holderJSON {
	var hs []holderJSON
	for _, h := range l.Holders {
		hs = append(hs, holderJSON{Token: h.Token, Owner: h.Owner, TTLMs: msOf(h.TTL), RemainingMs: msOf(h.Remaining), Session: h.Session})
	}
	return hs
}

// modeName is the API's JSON name of a mode: "" (left out, as protojson
// leaves out MODE_EXCLUSIVE, the default) or "MODE_SHARED".
func modeName(m sdk.Mode) string {
	if m == sdk.ModeShared {
		return "MODE_SHARED"
	}
	return ""
}

// kindText names how a key is held, for text output: "exclusive",
// "shared" or "limit N" (a semaphore).
func kindText(mode string, limit uint32) string {
	switch {
	case limit > 0:
		return fmt.Sprintf("limit %d", limit)
	case mode == "MODE_SHARED":
		return "shared"
	}
	return "exclusive"
}

// sessionText is " session N" for a holder under a session, else "".
func sessionText(id uint64) string {
	if id == 0 {
		return ""
	}
	return fmt.Sprintf(" session %d", id)
}

// writeLock renders "lock get" for people: an exclusive lock on one line,
// as it always was; a shared key or a semaphore with one line per holder.
func writeLock(w io.Writer, l lockJSON) {
	switch {
	case !l.Held:
		fmt.Fprintf(w, "%q is free\n", l.Key)
	case l.Mode == "" && l.Limit == 0 && len(l.Holders) <= 1:
		var sess uint64
		if len(l.Holders) == 1 {
			sess = l.Holders[0].Session
		}
		fmt.Fprintf(w, "%q held: token %d ttl %v remaining %v owner %q%s\n", l.Key, l.Token,
			durationOf(l.TTLMs), remainingOf(l.RemainingMs), l.Owner, sessionText(sess))
	default:
		if l.Limit > 0 {
			fmt.Fprintf(w, "%q held: %d of %d slots (semaphore)\n", l.Key, len(l.Holders), l.Limit)
		} else {
			fmt.Fprintf(w, "%q held shared by %d\n", l.Key, len(l.Holders))
		}
		for _, h := range l.Holders {
			fmt.Fprintf(w, "  token %d ttl %v remaining %v owner %q%s\n", h.Token,
				durationOf(h.TTLMs), remainingOf(h.RemainingMs), h.Owner, sessionText(h.Session))
		}
	}
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
	Key     string `json:"key"`
	Token   uint64 `json:"token,string"`
	TTLMs   int64  `json:"leaseMs,string"`
	Owner   string `json:"owner"`
	Session uint64 `json:"session,omitempty,string"`
}

// holdFlags are the flags that choose how "lock acquire" and "lock run"
// hold a key: shared, a semaphore slot, or under a session.
type holdFlags struct {
	shared  bool
	limit   uint32
	session uint64
}

// add registers the flags on cmd; withSession adds --session.
func (f *holdFlags) add(cmd *cobra.Command, withSession bool) {
	cmd.Flags().BoolVar(&f.shared, "shared", false, "hold KEY shared: shared holders coexist; an exclusive acquire waits until none holds KEY (readers-writer lock)")
	cmd.Flags().Uint32Var(&f.limit, "limit", 0, "hold one of N slots of a counting semaphore on KEY (every holder must give the same N)")
	if withSession {
		cmd.Flags().Uint64Var(&f.session, "session", 0, "acquire under session ID (session create): its TTL is the lease, its keepalive renews the lock")
	}
}

// options checks the combination and returns the SDK options it means.
func (f *holdFlags) options() ([]sdk.AcquireOption, error) {
	var opts []sdk.AcquireOption
	if f.shared && f.limit > 0 {
		return nil, usagef("--shared and --limit exclude each other: a semaphore is never shared")
	}
	if f.shared {
		opts = append(opts, sdk.WithShared())
	}
	if f.limit > 0 {
		opts = append(opts, sdk.WithLimit(f.limit))
	}
	if f.session != 0 {
		opts = append(opts, sdk.WithSessionID(f.session))
	}
	return opts, nil
}

// grantText renders "lock acquire" for people.
func grantText(w io.Writer, r grantJSON, f holdFlags) {
	kind := ""
	switch {
	case f.shared:
		kind = " shared"
	case f.limit > 0:
		kind = fmt.Sprintf(" (a slot of a semaphore of %d)", f.limit)
	}
	fmt.Fprintf(w, "acquired %q%s token %d ttl %v owner %q%s\n", r.Key, kind, r.Token, durationOf(r.TTLMs), r.Owner, sessionText(r.Session))
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
		hf    holdFlags
	)
	cmd := &cobra.Command{
		Use:   "acquire KEY",
		Short: "Acquire KEY for --ttl and print its fencing token (no background renewal)",
		Long: `Acquire KEY for a lease of --ttl and print the fencing token. Without --wait it
fails at once (exit 2) when the key is held (or, for --shared, when an
exclusive acquire is already waiting for it); with --wait it waits in the key's
FIFO queue until granted or --timeout, and exits 8 "still held after
--timeout" when that runs out. ticketctl does not renew the lease: use
"lock renew" before the TTL runs out. With -o value it prints the bare token:
tok=$(ticketctl -o value lock acquire KEY --ttl 60s). Retrying with the same --owner returns
the same grant, so a retry after an unknown outcome (exit 4) is safe.

--shared holds KEY shared (readers-writer lock: shared holders coexist, an
exclusive acquire waits until none holds KEY; a waiting exclusive acquire
holds back later shared ones). --limit N takes one of N slots of a counting
semaphore on KEY; every holder and waiter must give the same N (another N
fails, naming the key's limit). Every holder gets its own token.
--session ID acquires under a session (session create): the lock's lease is
the session's TTL (giving --ttl too is a usage error), "session keepalive ID" renews it with
every other lock of the session, and it is released when the session ends.

With --hold it prints the token, then keeps renewing the lease until Ctrl-C
(then releases the lock, exit 0) or until the lease is lost (exit 5): a lock
held from a terminal for manual maintenance.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			mode, err := hf.options()
			if err != nil {
				return err
			}
			if hold {
				if hf.session != 0 {
					return usagef("lock acquire: --hold and --session exclude each other: keep the session alive with session keepalive")
				}
				return g.holdAcquire(cmd, args[0], ttl, wait, owner, hf, mode)
			}
			if hf.session != 0 {
				if cmd.Flags().Changed("ttl") {
					return usagef("lock acquire: --ttl and --session exclude each other: a lock under a session has the session's TTL as its lease")
				}
				ttl = 0 // the session's TTL is the lease
			}
			opts := append([]sdk.AcquireOption(nil), mode...)
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
						gr, rerr = c.Acquire(ctx, args[0], ttl, append(mode, sdk.WithOwner(owner))...)
						return rerr
					})
				}
				if err != nil {
					return nil, ttlHint(err)
				}
				return grantJSON{Key: gr.Key, Token: gr.Token, TTLMs: msOf(gr.TTL), Owner: gr.Owner, Session: gr.Session}, nil
			}, func(w io.Writer, v any) { grantText(w, v.(grantJSON), hf) })
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 10*time.Second, "lease length (whole milliseconds)")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait in the key's queue until granted or --timeout")
	cmd.Flags().StringVar(&owner, "owner", "", "owner id (≤ 128 bytes); a retry with the same owner and mode gets the same grant (default: unique per call)")
	cmd.Flags().BoolVar(&hold, "hold", false, "keep renewing until Ctrl-C or lease loss, then release")
	hf.add(cmd, true)
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
		Short: "Show every holder of KEY, its mode and limit (linearizable unless --stale)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.do(cmd, func(ctx context.Context, c *sdk.Client) (any, error) {
				info, err := c.GetLock(ctx, args[0], readOptions(stale)...)
				if err != nil {
					return nil, err
				}
				return lockOf(info), nil
			}, func(w io.Writer, v any) { writeLock(w, v.(lockJSON)) })
		},
	}
	cmd.Flags().BoolVar(&stale, "stale", false, "let any node answer from local state (may lag the leader)")
	return cmd
}

// listLockJSON is one lock of "lock list": the API's Lock message in its
// JSON (one per key, with every holder).
type listLockJSON struct {
	Key         string       `json:"key"`
	Token       uint64       `json:"token,string"`
	TTLMs       int64        `json:"leaseMs,string"`
	RemainingMs int64        `json:"remainingMs,string"`
	Owner       string       `json:"owner"`
	Holders     []holderJSON `json:"holders,omitempty"`
	Mode        string       `json:"mode,omitempty"`
	Limit       uint32       `json:"limit,omitempty"`
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
		Short: "List held locks (optionally under --prefix), in key order, one row per holder",
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
						RemainingMs: msOf(l.Remaining), Owner: l.Owner, Holders: holdersOf(l), Mode: modeName(l.Mode), Limit: l.Limit})
				}
				return out, nil
			}, func(w io.Writer, v any) {
				tw := newTable(w, "KEY\tMODE\tTOKEN\tTTL\tREMAINING\tOWNER\tSESSION")
				for _, l := range v.(listJSON).Locks {
					hs := l.Holders
					if len(hs) == 0 { // a server from before shared locks sends no holders
						hs = []holderJSON{{Token: l.Token, Owner: l.Owner, TTLMs: l.TTLMs, RemainingMs: l.RemainingMs}}
					}
					for _, h := range hs {
						sess := "-"
						if h.Session != 0 {
							sess = strconv.FormatUint(h.Session, 10)
						}
						fmt.Fprintf(tw, "%s\t%s\t%d\t%v\t%v\t%s\t%s\n", l.Key, kindText(l.Mode, l.Limit), h.Token,
							durationOf(h.TTLMs), remainingOf(h.RemainingMs), h.Owner, sess)
					}
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
	Mode         string `json:"mode,omitempty"`
	Limit        uint32 `json:"limit,omitempty"`
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
// instead of naming token 0.
func checkText(r checkJSON) string {
	switch {
	case r.Valid && (r.Mode != "" || r.Limit > 0):
		return fmt.Sprintf("token %d is a current holder of %q (%s)", r.Token, r.Key, kindText(r.Mode, r.Limit))
	case r.Valid:
		return fmt.Sprintf("token %d is the current holder of %q", r.Token, r.Key)
	case r.CurrentToken == 0:
		return fmt.Sprintf("token %d is not the holder of %q: the key is free", r.Token, r.Key)
	}
	if r.Mode != "" || r.Limit > 0 {
		return fmt.Sprintf("token %d is not a holder of %q (%s): the newest holder is token %d", r.Token, r.Key, kindText(r.Mode, r.Limit), r.CurrentToken)
	}
	return fmt.Sprintf("token %d is not the holder of %q: token %d holds it", r.Token, r.Key, r.CurrentToken)
}

// newCheckCmd builds "lock check KEY TOKEN".
func newCheckCmd(g *globals) *cobra.Command {
	return keyTokenCmd(g, "check KEY TOKEN", "Tell whether TOKEN is a current holder of KEY (exit 3 if not)",
		func(ctx context.Context, c *sdk.Client, key string, tok uint64) (any, error) {
			tc, err := c.CheckToken(ctx, key, tok)
			if err != nil {
				return nil, err
			}
			r := checkJSON{Key: key, Token: tok, Valid: tc.Valid, CurrentToken: tc.Current, Mode: modeName(tc.Mode), Limit: tc.Limit}
			if !r.Valid {
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
