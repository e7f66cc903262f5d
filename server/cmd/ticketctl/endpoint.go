package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"github.com/spf13/cobra"

	"github.com/ticketd/ticketd/sdk"
)

// endpointHealthJSON is one endpoint's row of "endpoint health" (etcdctl
// endpoint health's fields, in the API's JSON style).
type endpointHealthJSON struct {
	Endpoint string `json:"endpoint"`
	Health   bool   `json:"health"`
	// Ready is the body of GET /readyz: "ok", or why the node is not ready.
	Ready string `json:"ready"`
	// GRPCHealth is the grpc.health.v1 status of the whole server
	// (SERVING, NOT_SERVING), or the error of the check.
	GRPCHealth string `json:"grpcHealth"`
	TookMs     int64  `json:"tookMs,string"`
	// Hint names the fix when the endpoint could not be asked because of
	// ticketctl's settings (plaintext to a TLS port, a certificate one
	// side refuses): the sentence other commands print (connhint.go).
	Hint string `json:"hint,omitempty"`
}

// endpointsHealthJSON is what "endpoint health" prints.
type endpointsHealthJSON struct {
	Endpoints []endpointHealthJSON `json:"endpoints"`
}

// value is what -o value prints: each endpoint's health, true or false,
// one per line in --endpoints order.
func (e endpointsHealthJSON) value() string {
	var b strings.Builder
	for i, r := range e.Endpoints {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprint(&b, r.Health)
	}
	return b.String()
}

// unhealthyError: "endpoint health" found endpoints that are not healthy (exit 1).
type unhealthyError struct{ bad, all int }

// Error implements error.
func (e *unhealthyError) Error() string {
	return fmt.Sprintf("%d of %d endpoints unhealthy", e.bad, e.all)
}

// newEndpointCmd builds "endpoint health" (etcdctl endpoint health).
func newEndpointCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "endpoint", Short: "Check each endpoint of --endpoints"}
	health := &cobra.Command{
		Use:   "health",
		Short: "Check every endpoint's /readyz and gRPC health; exit 1 if any is unhealthy",
		Long: `Ask every endpoint of --endpoints, one by one, for GET /readyz (has a leader,
applied up to its commit, Raft running, not shutting down) and for the
grpc.health.v1 status of the whole server, and print one line each (as
etcdctl endpoint health does). An endpoint is healthy when both say so. Exit 1
when any endpoint is unhealthy. --timeout bounds each endpoint's checks.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			eps, err := g.endpointList()
			if err != nil {
				return err
			}
			tc, err := g.tlsConfig(eps)
			if err != nil {
				return err
			}
			hc := healthHTTPClient(tc)
			defer hc.CloseIdleConnections()
			out := endpointsHealthJSON{Endpoints: []endpointHealthJSON{}}
			bad := 0
			for _, ep := range eps {
				ctx, cancel := context.WithTimeout(cmd.Context(), g.healthTimeout())
				r := g.checkEndpoint(ctx, hc, ep, tc != nil)
				cancel()
				if !r.Health {
					bad++
				}
				out.Endpoints = append(out.Endpoints, r)
			}
			if err := g.print(out, printHealth); err != nil {
				return err
			}
			if bad > 0 {
				return &unhealthyError{bad: bad, all: len(eps)}
			}
			return nil
		},
	}
	cmd.AddCommand(health)
	return cmd
}

// healthTimeout bounds one endpoint's checks: --timeout, or 5 s without one.
func (g *globals) healthTimeout() time.Duration {
	if g.timeout > 0 {
		return g.timeout
	}
	return 5 * time.Second
}

// printHealth writes the rows of "endpoint health" for people.
func printHealth(w io.Writer, v any) {
	for _, r := range v.(endpointsHealthJSON).Endpoints {
		took := durationOf(r.TookMs)
		if r.Health {
			fmt.Fprintf(w, "%s is healthy: ready, grpc %s, took %v\n", r.Endpoint, r.GRPCHealth, took)
			continue
		}
		if r.Hint != "" {
			fmt.Fprintf(w, "%s is unhealthy: %s (readyz %s); took %v\n", r.Endpoint, r.Hint, r.Ready, took)
			continue
		}
		fmt.Fprintf(w, "%s is unhealthy: readyz %s; grpc %s; took %v\n", r.Endpoint, r.Ready, r.GRPCHealth, took)
	}
}

// checkEndpoint asks ep for /readyz and for gRPC health.
func (g *globals) checkEndpoint(ctx context.Context, hc *http.Client, ep string, useTLS bool) endpointHealthJSON {
	base := ep
	if !strings.Contains(base, "://") {
		base = "http://" + base
		if useTLS {
			base = "https://" + ep
		}
	}
	base = strings.TrimRight(base, "/")
	start := time.Now()
	r := endpointHealthJSON{Endpoint: ep}
	ready, rerr := readyz(ctx, hc, base)
	r.Ready = ready
	if hint := connHint(sdk.ConnCause(ctx, base, rerr)); hint != "" {
		r.Hint = hint
	}
	res, err := grpchealth.NewClient(hc, base, connect.WithGRPC()).Check(ctx, &grpchealth.CheckRequest{})
	if err != nil {
		r.GRPCHealth = err.Error()
	} else {
		r.GRPCHealth = strings.ToUpper(strings.ReplaceAll(res.Status.String(), " ", "_"))
	}
	r.TookMs = time.Since(start).Milliseconds()
	r.Health = r.Ready == "ok" && err == nil && res.Status == grpchealth.StatusServing
	return r
}

// readyz returns the answer of GET base/readyz: "ok", the first failed
// check ("not ready: leader: ..."), or the request's error (also returned,
// for ConnCause).
func readyz(ctx context.Context, hc *http.Client, base string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
	if err != nil {
		return err.Error(), err
	}
	res, err := hc.Do(req)
	if err != nil {
		return err.Error(), err
	}
	defer func() { _ = res.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	msg := strings.TrimSpace(string(body))
	if res.StatusCode != http.StatusOK {
		return fmt.Sprintf("%s (HTTP %d)", msg, res.StatusCode), nil
	}
	return msg, nil
}

// healthHTTPClient returns an HTTP/2 client for the checks: h2c for http
// endpoints (gRPC needs HTTP/2), TLS with tc for https ones.
func healthHTTPClient(tc *tls.Config) *http.Client {
	tr := &http.Transport{TLSClientConfig: tc, ForceAttemptHTTP2: true}
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetHTTP2(true)
	tr.Protocols.SetUnencryptedHTTP2(tc == nil)
	return &http.Client{Transport: tr}
}
