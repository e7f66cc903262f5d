package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/ticketd/ticketd/sdk"
)

// newElectCmd builds "elect NAME VALUE -- CMD ARGS..." and
// "elect --observe NAME".
func newElectCmd(g *globals) *cobra.Command {
	var (
		ttl     time.Duration
		observe bool
		cf      childFlags
	)
	cmd := &cobra.Command{
		Use:   "elect NAME VALUE -- CMD [ARGS...] | elect --observe NAME",
		Short: "Campaign in election NAME with VALUE and run CMD while leader, or --observe its leaders",
		Long: `Wait until this process is the leader of election NAME (the sdk.Election
recipe: the holder of lock NAME, the lock's fencing token as its term), then
run CMD with TICKETD_KEY=NAME, TICKETD_FENCING_TOKEN=the term and
TICKETD_ELECTION_VALUE=VALUE in its environment, as "lock run" does: the
leadership is released when CMD exits (ticketctl exits with CMD's status),
and CMD's process group is terminated if the leadership is lost (exit 5).
--timeout does not bound the campaign.

--observe NAME prints the leader of election NAME and then every change,
one line each (-o json: {"name","value","term"}, term "0" and no value when
there is no leader), without campaigning, until Ctrl-C (etcdctl elect -l).

` + childEnvHelp,
		Args: func(cmd *cobra.Command, args []string) error {
			if observe {
				return cobra.ExactArgs(1)(cmd, args)
			}
			return cobra.MinimumNArgs(3)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if observe {
				if cmd.ArgsLenAtDash() >= 0 {
					return errUsage("ticketctl elect --observe NAME")
				}
				return g.observeElection(cmd, args[0])
			}
			if cmd.ArgsLenAtDash() != 2 {
				return errUsage("ticketctl elect NAME VALUE [flags] -- CMD [ARGS...]")
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			defer c.Close()
			name, value := args[0], args[1]
			ld, err := sdk.NewElection(c, ttl).Campaign(cmd.Context(), name, value)
			if err != nil {
				return ttlHint(err)
			}
			env := childEnv(os.Environ(), []string{"TICKETD_KEY=" + name, "TICKETD_FENCING_TOKEN=" + strconv.FormatUint(ld.Term(), 10),
				"TICKETD_ELECTION_VALUE=" + value}, g.token, cf.passToken)
			return runHeld(cmd, ld, ld.Resign, env, args[2:], cf.killTimeout)
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 10*time.Second, "leadership lease (whole milliseconds); renewed in the background")
	cmd.Flags().BoolVar(&observe, "observe", false, "print each leader of election NAME as it changes, without campaigning")
	cf.add(cmd, "the leadership is lost")
	return cmd
}

// leaderJSON is one line of "elect --observe": an election's leader (term
// 0 and no value: none).
type leaderJSON struct {
	Name  string `json:"name"`
	Value string `json:"value,omitempty"`
	Term  uint64 `json:"term,string"`
}

// value is what -o value prints: the leader's value ("" for none).
func (l leaderJSON) value() string { return l.Value }

// observeElection prints every leader of election name as it changes
// (sdk.Election.Observe, which follows Watch through node failures) until
// the command's ctx ends (Ctrl-C: exit 0).
func (g *globals) observeElection(cmd *cobra.Command, name string) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	defer c.Close()
	ctx := cmd.Context()
	for ld, err := range sdk.NewElection(c, 0).Observe(ctx, name) {
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if err := g.print(leaderJSON{Name: ld.Name, Value: ld.Value, Term: ld.Term}, func(w io.Writer, v any) {
			l := v.(leaderJSON)
			if l.Term == 0 {
				fmt.Fprintf(w, "%s: no leader\n", l.Name)
				return
			}
			fmt.Fprintf(w, "%s: leader %q term %d\n", l.Name, l.Value, l.Term)
		}); err != nil {
			return err
		}
	}
	return nil
}
