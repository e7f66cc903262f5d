package main

import (
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/ticketd/ticketd/sdk"
)

// newElectCmd builds "elect NAME VALUE -- CMD ARGS...".
func newElectCmd(g *globals) *cobra.Command {
	var ttl, grace time.Duration
	cmd := &cobra.Command{
		Use:   "elect NAME VALUE -- CMD [ARGS...]",
		Short: "Campaign in election NAME with VALUE and run CMD while leader",
		Long: `Wait until this process is the leader of election NAME (the sdk.Election
recipe: the holder of lock NAME, the lock's fencing token as its term), then
run CMD with TICKETD_KEY=NAME, TICKETD_TOKEN=the term and
TICKETD_ELECTION_VALUE=VALUE in its environment, as "lock run" does: the
leadership is released when CMD exits (ticketctl exits with CMD's status),
and CMD is terminated if the leadership is lost (exit 5). --timeout does not
bound the campaign.`,
		Args: cobra.MinimumNArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
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
			env := []string{"TICKETD_KEY=" + name, "TICKETD_TOKEN=" + strconv.FormatUint(ld.Term(), 10), "TICKETD_ELECTION_VALUE=" + value, bearerEnv + "=" + g.token}
			return runHeld(cmd, ld, ld.Resign, env, args[2:], grace)
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 10*time.Second, "leadership lease (whole milliseconds); renewed in the background")
	cmd.Flags().DurationVar(&grace, "kill-grace", 10*time.Second, "after a lost leadership, time between SIGTERM and SIGKILL to CMD")
	return cmd
}
