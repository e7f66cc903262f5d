package main

import (
	"context"
	"crypto/tls"
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
	envErr    error  // a malformed TICKETD_* variable, reported before any command runs
	cacert    string // --cacert: CA bundle verifying the servers (https)
	cert, key string // --cert, --key: client certificate for --client-cert-auth
	// Where --cacert, --cert and --key came from: the flag or a variable
	// (clientcert.go), for errors.
	cacertFrom, certFrom, keyFrom string
	token                         string // --token: bearer token (--auth-tokens-file on the server)
	stdout                        io.Writer
	stderr                        io.Writer // warnings (a bearer token over plaintext loopback)
}

// newRootCmd builds the ticketctl command tree writing to stdout and
// stderr, and returns it with the globals its flags fill.
func newRootCmd(stdout, stderr io.Writer) (*cobra.Command, *globals) {
	g := &globals{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:   "ticketctl",
		Short: "Command-line client of a ticketd lock cluster",
		Long: `ticketctl acquires, renews, releases and inspects ticketd locks and manages
the cluster. It finds the leader from any endpoint and retries through elections.
Every global flag can be set in the environment: TICKETD_ENDPOINTS,
TICKETD_OUTPUT, TICKETD_TIMEOUT, TICKETD_GRPC, TICKETD_CACERT,
TICKETD_CLIENT_CERT, TICKETD_CLIENT_KEY (not ticketd's TICKETD_CERT_FILE and
TICKETD_KEY_FILE, the node's own) and TICKETD_TOKEN; a flag wins over its
variable.

Output (-o): text for people; json, the API's own JSON (protojson: the
.proto's lowerCamelCase field names, 64-bit integers as strings), one object
per line, errors too (on stderr: {"code","message","exitCode"}); value, the
one value a script wants (lock acquire: the token), tok=$(ticketctl -o value
lock acquire KEY --ttl 60s).

` + exitCodesHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if g.envErr != nil {
				return g.envErr
			}
			g.noteFlagSources(cmd)
			switch g.output {
			case outText, outJSON, outValue:
				return nil
			}
			return usagef("--output must be text, json or value, not %q", g.output)
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	pf := root.PersistentFlags()
	pf.StringVar(&g.endpoints, "endpoints", envOr("TICKETD_ENDPOINTS", defaultEndpoints), "comma-separated API addresses of cluster nodes (env TICKETD_ENDPOINTS)")
	pf.StringVarP(&g.output, "output", "o", envOr("TICKETD_OUTPUT", outText), "output format: text, json (the API's JSON) or value (the bare result) (env TICKETD_OUTPUT)")
	pf.DurationVar(&g.timeout, "timeout", g.envDuration("TICKETD_TIMEOUT", 15*time.Second), "give up after this long, retries included (0: no limit) (env TICKETD_TIMEOUT)")
	pf.BoolVar(&g.grpc, "grpc", g.envBool("TICKETD_GRPC"), "use the gRPC protocol instead of Connect (env TICKETD_GRPC)")
	ca := envSetting("TICKETD_CACERT")
	cert, key := clientCertEnv()
	g.cacertFrom, g.certFrom, g.keyFrom = ca.from, cert.from, key.from
	pf.StringVar(&g.cacert, "cacert", ca.path, "verify the servers' TLS certificates with this CA bundle and use https (env TICKETD_CACERT)")
	pf.StringVar(&g.cert, "cert", cert.path, "client certificate (PEM) to present (env "+envClientCert+")")
	// Not TICKETD_KEY: `lock run` and `elect` give their command TICKETD_KEY (the lock name).
	pf.StringVar(&g.key, "key", key.path, "client certificate's key (PEM) (env "+envClientKey+")")
	pf.StringVar(&g.token, "token", bearerToken(), "bearer token to authenticate with; prefer the env TICKETD_TOKEN (a flag shows in ps)")

	root.AddCommand(newLockCmd(g), newStatusCmd(g), newMembersCmd(g), newTransferLeaderCmd(g), newCertCmd(stdout),
		newSnapshotCmd(g), newWatchCmd(g), newElectCmd(g), newAuthCmd(stdout, os.Stdin), newEndpointCmd(g), newSessionCmd(g), newVersionCmd(g))
	strictUsage(root)
	return root, g
}

// bearerToken is --token's default: TICKETD_TOKEN, the bearer token
// everywhere (a command under "lock run" or "elect" has it only when
// started with --pass-token; its fencing token is TICKETD_FENCING_TOKEN).
func bearerToken() string { return os.Getenv("TICKETD_TOKEN") }

// envOr returns the environment variable name, or def when it is unset or empty.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// envDuration returns the duration in the environment variable name, or
// def; a malformed value is remembered as a usage error (g.envErr).
func (g *globals) envDuration(name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		g.envErr = usagef("%s=%q: want a duration such as 15s", name, v)
		return def
	}
	return d
}

// envBool returns the boolean in the environment variable name (false when
// unset); a malformed value is remembered as a usage error (g.envErr).
func (g *globals) envBool(name string) bool {
	v := os.Getenv(name)
	if v == "" {
		return false
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		g.envErr = usagef("%s=%q: want true or false", name, v)
	}
	return b
}

// do runs fn with a client for the configured endpoints and a ctx bounded
// by --timeout, then prints fn's result (g.print), even next to an error
// ("lock check" of a token that is not current).
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
		if perr := g.print(v, text); perr != nil && err == nil {
			err = perr
		}
	}
	return err
}

// endpointList returns the --endpoints addresses; none is a usage error.
func (g *globals) endpointList() ([]string, error) {
	var eps []string
	for _, e := range strings.Split(g.endpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			eps = append(eps, e)
		}
	}
	if len(eps) == 0 {
		return nil, usagef("--endpoints is empty: give one or more host:port API addresses")
	}
	return eps, nil
}

// tlsConfig returns the client TLS settings of --cacert, --cert and --key,
// or nil for plaintext (none given and no https endpoint).
func (g *globals) tlsConfig(eps []string) (*tls.Config, error) {
	if g.cacert == "" && g.cert == "" && g.key == "" && !hasHTTPS(eps) {
		return nil, nil
	}
	return g.loadClientTLS()
}

// client returns a client for the configured endpoints, protocol and TLS
// settings; the caller closes it.
func (g *globals) client() (*sdk.Client, error) {
	eps, err := g.endpointList()
	if err != nil {
		return nil, err
	}
	var opts []sdk.Option
	if g.grpc {
		opts = append(opts, sdk.WithGRPC())
	}
	tc, err := g.tlsConfig(eps)
	if err != nil {
		return nil, err
	}
	if g.token != "" {
		if err := checkTokenTransport(eps, tc != nil, g.stderr); err != nil {
			return nil, err
		}
		opts = append(opts, sdk.WithBearerToken(g.token))
	}
	if tc != nil {
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
		return 0, usagef("TOKEN %q: want a positive integer (the fencing token acquire printed)", s)
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
