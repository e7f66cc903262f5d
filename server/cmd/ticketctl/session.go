package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/ticketd/ticketd/sdk"
)

// sessionJSON is what "session create" and "session keepalive" print:
// CreateSessionResponse (KeepAliveResponse plus the session asked about) in
// the API's JSON.
type sessionJSON struct {
	Session uint64 `json:"session,string"`
	TTLMs   int64  `json:"ttlMs,string"`
}

// value is what -o value prints: the session id.
func (s sessionJSON) value() string { return strconv.FormatUint(s.Session, 10) }

// closedJSON is what "session close" prints: the session and closed
// (always true: a failure is an error).
type closedJSON struct {
	Session uint64 `json:"session,string"`
	Closed  bool   `json:"closed"`
}

// value is what -o value prints: nothing (the exit status says it all).
func (closedJSON) value() string { return "" }

// newSessionCmd builds "session" and its subcommands (docs/design.md#sessions:
// etcd leases, Consul sessions).
func newSessionCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "session",
		Short: "Create, keep alive and close sessions: one lease for many locks",
		Long: `A session is one lease that many locks are acquired under (lock acquire
--session ID), like an etcd lease or a Consul session: one "session keepalive"
renews every lock in it in one replicated command, and when the session ends
(closed, or its TTL ran out without a keepalive) every lock in it is released
in one committed entry. ticketctl does not keep a session alive in the
background: run "session keepalive ID" more often than its TTL, or run a
command under "session run", which keeps its session alive while it runs.
"session list" and "session get ID" show a principal its own sessions (an
admin every session) with their TTL, remaining lease and locks.`,
	}
	cmd.AddCommand(newSessionCreateCmd(g), newSessionKeepAliveCmd(g), newSessionCloseCmd(g),
		newSessionListCmd(g), newSessionGetCmd(g), newSessionRunCmd(g))
	return cmd
}

// newSessionCreateCmd builds "session create --ttl D".
func newSessionCreateCmd(g *globals) *cobra.Command {
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Open a session of --ttl and print its id (not kept alive in the background)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.do(cmd, func(ctx context.Context, c *sdk.Client) (any, error) {
				s, err := c.CreateSession(ctx, ttl)
				if err != nil {
					return nil, ttlHint(err)
				}
				return sessionJSON{Session: s.ID(), TTLMs: msOf(s.TTL())}, nil
			}, func(w io.Writer, v any) {
				s := v.(sessionJSON)
				fmt.Fprintf(w, "created session %d ttl %v\n", s.Session, durationOf(s.TTLMs))
			})
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 10*time.Second, "session lease (whole milliseconds, within the servers' lease bounds)")
	return cmd
}

// newSessionKeepAliveCmd builds "session keepalive ID".
func newSessionKeepAliveCmd(g *globals) *cobra.Command {
	return sessionIDCmd(g, "keepalive ID", "Restart the lease of session ID and of every lock under it (exit 3 if it has ended)",
		func(ctx context.Context, c *sdk.Client, id uint64) (any, error) {
			ttl, err := c.KeepAlive(ctx, id)
			if err != nil {
				return nil, err
			}
			return sessionJSON{Session: id, TTLMs: msOf(ttl)}, nil
		}, func(w io.Writer, v any) {
			s := v.(sessionJSON)
			fmt.Fprintf(w, "kept session %d alive for %v\n", s.Session, durationOf(s.TTLMs))
		})
}

// newSessionCloseCmd builds "session close ID".
func newSessionCloseCmd(g *globals) *cobra.Command {
	return sessionIDCmd(g, "close ID", "End session ID, releasing every lock under it in one entry (exit 3 if it has ended)",
		func(ctx context.Context, c *sdk.Client, id uint64) (any, error) {
			if err := c.CloseSession(ctx, id); err != nil {
				return nil, err
			}
			return closedJSON{Session: id, Closed: true}, nil
		}, func(w io.Writer, v any) {
			fmt.Fprintf(w, "closed session %d\n", v.(closedJSON).Session)
		})
}

// sessionIDCmd builds a command of the form "VERB ID": it checks that ID is
// a positive integer (a usage error, exit 64, before any request), then
// runs fn through g.do.
func sessionIDCmd(g *globals, use, short string, fn func(ctx context.Context, c *sdk.Client, id uint64) (any, error), text func(w io.Writer, v any)) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseUint(args[0], 10, 64)
			if err != nil || id == 0 {
				return usagef("ID %q: want a positive integer (the id session create printed)", args[0])
			}
			return g.do(cmd, func(ctx context.Context, c *sdk.Client) (any, error) {
				return fn(ctx, c, id)
			}, text)
		},
	}
}
