package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ticketd/ticketd/sdk"
)

// eventJSON is one event as "watch -o json" prints it, one object per
// line: the API's WatchEvent in its JSON (protojson names, 64-bit integers
// as strings, enums by name: TYPE_GRANTED, ..., TYPE_STARTED for the
// server's announcement of where the watch starts, TYPE_RESET for the
// SDK's re-list marker; MODE_SHARED, MODE_EXCLUSIVE left out as protojson
// leaves out a default).
type eventJSON struct {
	Index    uint64 `json:"index,string"`
	Type     string `json:"type"`
	Key      string `json:"key,omitempty"`
	Token    uint64 `json:"token,omitempty,string"`
	Owner    string `json:"owner,omitempty"`
	TTLMs    int64  `json:"leaseMs,omitempty,string"`
	Existing bool   `json:"existing,omitempty"`
	Mode     string `json:"mode,omitempty"`
	Limit    uint32 `json:"limit,omitempty"`
	Session  uint64 `json:"session,omitempty,string"`
}

// watchJSON is ev as "watch -o json" prints it.
func watchJSON(ev sdk.Event) eventJSON {
	return eventJSON{Index: ev.Index, Type: "TYPE_" + ev.Type.String(), Key: ev.Key, Token: ev.Token,
		Owner: ev.Owner, TTLMs: msOf(ev.TTL), Existing: ev.Existing, Mode: modeName(ev.Mode), Limit: ev.Limit, Session: ev.Session}
}

// watchText is ev as "watch" prints it for people: index, type, then what
// is known of the holder (key, token, owner, TTL, how the key is held when
// not exclusive, session), e.g.
// `12 GRANTED "jobs/a" token 3 owner "o" ttl 5s shared session 7`.
func watchText(ev sdk.Event) string {
	line := fmt.Sprintf("%d %s", ev.Index, ev.Type)
	if ev.Key != "" {
		line += fmt.Sprintf(" %q token %d", ev.Key, ev.Token)
	}
	if ev.Owner != "" {
		line += fmt.Sprintf(" owner %q", ev.Owner)
	}
	if ev.TTL > 0 {
		line += fmt.Sprintf(" ttl %v", ev.TTL)
	}
	if kind := kindText(modeName(ev.Mode), ev.Limit); kind != "exclusive" {
		line += " " + kind
	}
	line += sessionText(ev.Session)
	if ev.Existing {
		line += " (existing)"
	}
	return line
}

// newWatchCmd builds "watch PREFIX [--from INDEX] [--existing] [--stale]".
func newWatchCmd(g *globals) *cobra.Command {
	var (
		from            uint64
		existing, stale bool
	)
	cmd := &cobra.Command{
		Use:   "watch [PREFIX]",
		Short: "Print changes to locks under PREFIX as they happen, until Ctrl-C",
		Long: `Print every change (GRANTED, RENEWED, RELEASED, EXPIRED) to locks whose key
starts with PREFIX, in log order, each with the Raft log index that applied
it, and how the key is held (shared, limit N) and the session when set.
--from INDEX resumes after an earlier watch (last index + 1); --existing
first prints the locks held now. The watch survives node failures (it resumes
on another endpoint from the last index); RESET means it had to re-list: the
locks printed next are the whole state. With -o json, one object per line,
the API's WatchEvent JSON; the first (after the existing locks) is the
TYPE_STARTED announcement whose index is the one the watch starts after.
--timeout does not apply.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if g.output == outValue {
				return usagef("watch: -o value is not supported (events are several values); use -o json")
			}
			prefix := ""
			if len(args) == 1 {
				prefix = args[0]
			}
			var opts []sdk.WatchOption
			if from > 0 {
				opts = append(opts, sdk.WithStartIndex(from))
			}
			if existing {
				opts = append(opts, sdk.WithExisting())
			}
			if stale {
				opts = append(opts, sdk.WithStaleWatch())
			}
			if g.output == outJSON {
				opts = append(opts, sdk.WithStartedEvents()) // a TYPE_STARTED line says where the watch starts
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			defer c.Close()
			enc := json.NewEncoder(g.stdout)
			for ev, err := range c.Watch(cmd.Context(), prefix, opts...) {
				if err != nil {
					if errors.Is(err, context.Canceled) && cmd.Context().Err() != nil {
						return nil // Ctrl-C
					}
					return err
				}
				if g.output == outJSON {
					if err := enc.Encode(watchJSON(ev)); err != nil {
						return err
					}
					continue
				}
				fmt.Fprintln(g.stdout, watchText(ev))
			}
			return nil
		},
	}
	cmd.Flags().Uint64Var(&from, "from", 0, "first log index to print (resume: last index seen + 1)")
	cmd.Flags().BoolVar(&existing, "existing", false, "first print the locks held now")
	cmd.Flags().BoolVar(&stale, "stale", false, "start without catching up with the leader (works without a leader)")
	return cmd
}
