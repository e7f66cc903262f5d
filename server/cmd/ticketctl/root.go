package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ticketd/ticketd/sdk"
	"github.com/ticketd/ticketd/server/security"
)

// errInvalidToken: "lock check" found the token is not the current holder.
var errInvalidToken = errors.New("token is not the current holder")

// defaultEndpoints are the API addresses of the local cluster that
// scripts/cluster.sh starts, used without --endpoints or TICKETD_ENDPOINTS.
const defaultEndpoints = "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003"

// globals are the flags every command shares.
type globals struct {
	endpoints string
	output    string
	timeout   time.Duration
	grpc      bool
	cacert    string // --cacert: CA bundle verifying the servers (https)
	cert, key string // --cert, --key: client certificate for --client-cert-auth
	token     string // --token: bearer token (--auth-tokens-file on the server)
	stdout    io.Writer
}

// newRootCmd builds the ticketctl command tree writing to stdout and stderr.
func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdout: stdout}
	root := &cobra.Command{
		Use:   "ticketctl",
		Short: "Command-line client of a ticketd lock cluster",
		Long: `ticketctl acquires, renews, releases and inspects ticketd locks and manages
the cluster. It finds the leader from any endpoint and retries through elections.

Exit codes: 0 success, 1 failure, 2 key held by someone else, 3 no lock with
that token (or "check": token not current), 4 outcome unknown (retry with the
same --owner), 5 lease lost (lock run, elect, --hold), 6 permission denied
(the policy does not allow it, or the lock is another principal's), 7
unauthenticated (no accepted client certificate or --token).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if g.output != "text" && g.output != "json" {
				return fmt.Errorf("--output must be text or json, not %q", g.output)
			}
			return nil
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	eps := os.Getenv("TICKETD_ENDPOINTS")
	if eps == "" {
		eps = defaultEndpoints
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.endpoints, "endpoints", eps, "comma-separated API addresses of cluster nodes (env TICKETD_ENDPOINTS)")
	pf.StringVarP(&g.output, "output", "o", "text", "output format: text or json")
	pf.DurationVar(&g.timeout, "timeout", 15*time.Second, "give up after this long, retries included (0: no limit)")
	pf.BoolVar(&g.grpc, "grpc", false, "use the gRPC protocol instead of Connect")
	pf.StringVar(&g.cacert, "cacert", os.Getenv("TICKETD_CACERT"), "verify the servers' TLS certificates with this CA bundle and use https (env TICKETD_CACERT)")
	pf.StringVar(&g.cert, "cert", os.Getenv("TICKETD_CERT"), "client certificate (PEM) to present (env TICKETD_CERT)")
	// Not TICKETD_KEY: `lock run` and `elect` give their command TICKETD_KEY (the lock name).
	pf.StringVar(&g.key, "key", os.Getenv("TICKETD_KEY_FILE"), "client certificate's key (PEM) (env TICKETD_KEY_FILE)")
	pf.StringVar(&g.token, "token", os.Getenv("TICKETD_TOKEN"), "bearer token to authenticate with; prefer the env TICKETD_TOKEN (a flag shows in ps)")

	root.AddCommand(newLockCmd(g), newStatusCmd(g), newMembersCmd(g), newTransferLeaderCmd(g), newCertCmd(stdout),
		newSnapshotCmd(g), newWatchCmd(g), newElectCmd(g), newAuthCmd(stdout, os.Stdin))
	return root
}

// do runs fn with a client for the configured endpoints and a ctx bounded
// by --timeout, then prints fn's result: as JSON with -o json, else with
// the text function.
func (g *globals) do(cmd *cobra.Command, fn func(ctx context.Context, c *sdk.Client) (any, error), text func(w io.Writer, v any)) error {
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
	v, err := fn(ctx, c)
	if v != nil {
		if g.output == "json" {
			enc := json.NewEncoder(g.stdout)
			enc.SetIndent("", "  ")
			if jerr := enc.Encode(v); jerr != nil && err == nil {
				err = jerr
			}
		} else {
			text(g.stdout, v)
		}
	}
	return err
}

// client returns a client for the configured endpoints, protocol and TLS
// settings; the caller closes it.
func (g *globals) client() (*sdk.Client, error) {
	var eps []string
	for _, e := range strings.Split(g.endpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			eps = append(eps, e)
		}
	}
	var opts []sdk.Option
	if g.grpc {
		opts = append(opts, sdk.WithGRPC())
	}
	if g.token != "" {
		opts = append(opts, sdk.WithBearerToken(g.token))
	}
	if g.cacert != "" || g.cert != "" || g.key != "" || hasHTTPS(eps) {
		tc, err := security.LoadClientConfig(g.cacert, g.cert, g.key)
		if err != nil {
			return nil, err
		}
		opts = append(opts, sdk.WithTLS(tc))
	}
	return sdk.New(eps, opts...)
}

// hasHTTPS reports whether an endpoint is an https URL.
func hasHTTPS(eps []string) bool {
	for _, e := range eps {
		if strings.HasPrefix(e, "https://") {
			return true
		}
	}
	return false
}

// parseToken parses a fencing token argument.
func parseToken(s string) (uint64, error) {
	t, err := strconv.ParseUint(s, 10, 64)
	if err != nil || t == 0 {
		return 0, fmt.Errorf("token %q: want a positive integer", s)
	}
	return t, nil
}

// msOf returns d in whole milliseconds, for JSON.
func msOf(d time.Duration) int64 { return d.Milliseconds() }

// newTable returns a tabwriter over w that lines up tab-separated columns
// two spaces apart, with header (tab-separated column names) written as its
// first row. The caller writes the rows and calls Flush.
func newTable(w io.Writer, header string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	return tw
}

// durationOf turns a JSON millisecond count back into a Duration, for text.
func durationOf(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

// remainingOf renders a lease's remaining_ms: the API sends -1 when it is
// unknown (a stale read served by a follower, which keeps no deadlines).
func remainingOf(ms int64) string {
	if ms < 0 {
		return "unknown (stale read)"
	}
	return durationOf(ms).String()
}
