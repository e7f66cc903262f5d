package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ticketd/ticketd/sdk"
)

// sessionInfoJSON is one session of "session get" and "session list": the
// API's SessionInfo message in its JSON.
type sessionInfoJSON struct {
	Session     uint64            `json:"session,string"`
	TTLMs       int64             `json:"ttlMs,string"`
	RemainingMs int64             `json:"remainingMs,string"`
	Principal   string            `json:"principal,omitempty"`
	Locks       []sessionLockJSON `json:"locks,omitempty"`
}

// sessionLockJSON is the API's SessionLock message in its JSON.
type sessionLockJSON struct {
	Key   string `json:"key"`
	Token uint64 `json:"token,string"`
	Owner string `json:"owner"`
	Mode  string `json:"mode,omitempty"`
	Limit uint32 `json:"limit,omitempty"`
}

// value is what -o value prints: the session id.
func (s sessionInfoJSON) value() string { return strconv.FormatUint(s.Session, 10) }

// sessionInfoOf converts an SDK SessionInfo for printing.
func sessionInfoOf(s sdk.SessionInfo) sessionInfoJSON {
	out := sessionInfoJSON{Session: s.ID, TTLMs: msOf(s.TTL), RemainingMs: msOf(s.Remaining), Principal: s.Principal}
	for _, l := range s.Locks {
		out.Locks = append(out.Locks, sessionLockJSON{Key: l.Key, Token: l.Token, Owner: l.Owner, Mode: modeName(l.Mode), Limit: l.Limit})
	}
	return out
}

// writeSession renders "session get" for people: the session on one line,
// then one line per lock held under it.
func writeSession(w io.Writer, s sessionInfoJSON) {
	principal := ""
	if s.Principal != "" {
		principal = fmt.Sprintf(" principal %q", s.Principal)
	}
	fmt.Fprintf(w, "session %d ttl %v remaining %v%s locks %d\n", s.Session, durationOf(s.TTLMs), remainingOf(s.RemainingMs), principal, len(s.Locks))
	for _, l := range s.Locks {
		fmt.Fprintf(w, "  %q token %d %s owner %q\n", l.Key, l.Token, kindText(l.Mode, l.Limit), l.Owner)
	}
}

// newSessionGetCmd builds "session get ID".
func newSessionGetCmd(g *globals) *cobra.Command {
	return sessionIDCmd(g, "get ID", "Show session ID: TTL, remaining lease, principal and its locks (exit 3 if it has ended)",
		func(ctx context.Context, c *sdk.Client, id uint64) (any, error) {
			s, err := c.GetSession(ctx, id)
			if err != nil {
				return nil, err
			}
			return sessionInfoOf(s), nil
		}, func(w io.Writer, v any) { writeSession(w, v.(sessionInfoJSON)) })
}

// sessionListJSON is what "session list" prints: ListSessionsResponse in
// the API's JSON (every page).
type sessionListJSON struct {
	Sessions []sessionInfoJSON `json:"sessions"`
}

// value is what -o value prints: the session ids, one per line.
func (l sessionListJSON) value() string {
	ids := make([]string, 0, len(l.Sessions))
	for _, s := range l.Sessions {
		ids = append(ids, s.value())
	}
	return strings.Join(ids, "\n")
}

// newSessionListCmd builds "session list [--prefix P] [--principal NAME]".
func newSessionListCmd(g *globals) *cobra.Command {
	var f sdk.SessionFilter
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List open sessions in id order (a principal sees its own, an admin all); --prefix: those holding a lock under it",
		Long: `List the open sessions the caller may see (its own; an admin's, every one), in
id order, one row each with its TTL, remaining lease, principal and the number
of locks under it. --prefix P keeps the sessions holding at least one lock
whose key starts with P (the keys, not the session ids: "which sessions hold
locks under jobs/?"); --principal NAME keeps NAME's sessions.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.do(cmd, func(ctx context.Context, c *sdk.Client) (any, error) {
				ss, err := c.ListSessions(ctx, f)
				if err != nil {
					return nil, err
				}
				out := sessionListJSON{Sessions: []sessionInfoJSON{}}
				for _, s := range ss {
					out.Sessions = append(out.Sessions, sessionInfoOf(s))
				}
				return out, nil
			}, func(w io.Writer, v any) {
				tw := newTable(w, "SESSION\tTTL\tREMAINING\tPRINCIPAL\tLOCKS")
				for _, s := range v.(sessionListJSON).Sessions {
					fmt.Fprintf(tw, "%d\t%v\t%s\t%s\t%d\n", s.Session, durationOf(s.TTLMs), remainingOf(s.RemainingMs), s.Principal, len(s.Locks))
				}
				_ = tw.Flush()
			})
		},
	}
	cmd.Flags().StringVar(&f.KeyPrefix, "prefix", "", "only sessions holding a lock whose key starts with this prefix")
	cmd.Flags().StringVar(&f.Principal, "principal", "", "only sessions this principal opened")
	return cmd
}

// newSessionRunCmd builds "session run --ttl D -- CMD ARGS...".
func newSessionRunCmd(g *globals) *cobra.Command {
	var (
		ttl time.Duration
		cf  childFlags
	)
	cmd := &cobra.Command{
		Use:   "run -- CMD [ARGS...]",
		Short: "Open a session of --ttl, keep it alive while CMD runs (its id in TICKETD_SESSION), then close it",
		Long: `Open a session of --ttl, keep it alive in the background (a KeepAlive every
TTL/3, as the SDK's sessions do) and run CMD with TICKETD_SESSION (the
session id) in its environment: CMD's own "lock acquire --session
$TICKETD_SESSION" calls hold their locks for as long as CMD runs. When CMD
exits the session is closed, releasing every lock under it, and ticketctl
exits with CMD's status. If the session is lost (a KeepAlive refused, or none
acknowledged within the TTL), CMD's process group is terminated and
ticketctl exits 5.

` + childEnvHelp,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 0 {
				return errUsage("ticketctl session run --ttl D [flags] -- CMD [ARGS...]")
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			defer c.Close()
			ctx := cmd.Context()
			if g.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, g.timeout)
				defer cancel()
			}
			s, err := c.CreateSession(ctx, ttl)
			if err != nil {
				return ttlHint(err)
			}
			env := childEnv(os.Environ(), []string{"TICKETD_SESSION=" + strconv.FormatUint(s.ID(), 10)}, g.token, cf.passToken)
			return runHeld(cmd, s, s.Close, env, args, cf.killTimeout)
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 30*time.Second, "session lease (whole milliseconds); kept alive in the background")
	cf.add(cmd, "the session is lost")
	return cmd
}
