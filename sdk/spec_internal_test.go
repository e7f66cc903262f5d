package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
)

// This file checks the Go SDK against testdata/client-spec.json, the
// client behaviour it shares with the TypeScript SDK (whose
// test/spec.test.mjs checks that one against the same file): defaults,
// retry backoff, lease timing and the classification of errors.

// clientSpec is testdata/client-spec.json. Decoding refuses unknown
// fields, so a row or default added to the file fails here until this
// test reads (and checks) it.
type clientSpec struct {
	About    json.RawMessage `json:"about"`
	Defaults struct {
		RequestTimeoutMs           float64 `json:"requestTimeoutMs"`
		BackoffBaseMs              float64 `json:"backoffBaseMs"`
		BackoffMaxMs               float64 `json:"backoffMaxMs"`
		BackoffJitter              string  `json:"backoffJitter"`
		DriftRate                  float64 `json:"driftRate"`
		MinMarginMs                float64 `json:"minMarginMs"`
		KeepAliveMs                float64 `json:"keepAliveMs"`
		RenewPeriodDivisor         int     `json:"renewPeriodDivisor"`
		RenewAttemptTimeoutDivisor int     `json:"renewAttemptTimeoutDivisor"`
		RenewBackoffCapDivisor     int     `json:"renewBackoffCapDivisor"`
		LeaderHintQuickRetries     int     `json:"leaderHintQuickRetries"`
		ListPageSize               int     `json:"listPageSize"`
		OwnerPrefixMaxLength       int     `json:"ownerPrefixMaxLength"`
	} `json:"defaults"`
	Backoff struct {
		About json.RawMessage `json:"about"`
		Rows  []struct {
			Attempt int     `json:"attempt"`
			MaxMs   float64 `json:"maxMs"`
		} `json:"rows"`
	} `json:"backoff"`
	Lease struct {
		About json.RawMessage `json:"about"`
		Rows  []struct {
			TTLMs            float64 `json:"ttlMs"`
			RenewAtMs        float64 `json:"renewAtMs"`
			DeadlineMs       float64 `json:"deadlineMs"`
			AttemptTimeoutMs float64 `json:"attemptTimeoutMs"`
			BackoffCapMs     float64 `json:"backoffCapMs"`
		} `json:"rows"`
	} `json:"lease"`
	Classify struct {
		About json.RawMessage `json:"about"`
		Rows  []specRow       `json:"rows"`
	} `json:"classify"`
}

// specRow is one row of the classification table.
type specRow struct {
	Code             string  `json:"code"`
	GRPC             int     `json:"grpc"`
	From             string  `json:"from"`
	Op               string  `json:"op"`
	LeaderHint       *string `json:"leaderHint"`
	LimitMismatch    *uint32 `json:"limitMismatch"`
	WatchOldestIndex *uint64 `json:"watchOldestIndex"`
	Transport        string  `json:"transport"`
	Retry            string  `json:"retry"`
	Hint             string  `json:"hint"`
	Error            string  `json:"error"`
}

func (r specRow) String() string {
	b, _ := json.Marshal(r)
	return string(b)
}

// loadSpec reads and decodes testdata/client-spec.json.
func loadSpec(t *testing.T) clientSpec {
	t.Helper()
	b, err := os.ReadFile("testdata/client-spec.json")
	require.NoError(t, err)
	var s clientSpec
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&s), "testdata/client-spec.json")
	return s
}

// msOf converts the spec's milliseconds to a Duration.
func msOf(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

// inMs converts a Duration to milliseconds, for comparison with the spec.
func inMs(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func TestSpecDefaults(t *testing.T) {
	t.Parallel()
	d := loadSpec(t).Defaults
	assert.Equal(t, msOf(d.RequestTimeoutMs), DefaultRequestTimeout, "requestTimeoutMs")
	assert.Equal(t, msOf(d.BackoffBaseMs), DefaultBackoffBase, "backoffBaseMs")
	assert.Equal(t, msOf(d.BackoffMaxMs), DefaultBackoffMax, "backoffMaxMs")
	assert.InDelta(t, d.DriftRate, DefaultDriftRate, 1e-12, "driftRate")
	assert.Equal(t, msOf(d.MinMarginMs), DefaultMinMargin, "minMarginMs")
	assert.Equal(t, msOf(d.KeepAliveMs), DefaultKeepAlive, "keepAliveMs")
	assert.Equal(t, d.RenewPeriodDivisor, renewPeriodDivisor, "renewPeriodDivisor")
	assert.Equal(t, d.RenewAttemptTimeoutDivisor, renewAttemptTimeoutDivisor, "renewAttemptTimeoutDivisor")
	assert.Equal(t, d.RenewBackoffCapDivisor, renewBackoffCapDivisor, "renewBackoffCapDivisor")
	assert.Equal(t, d.LeaderHintQuickRetries, leaderHintQuickRetries, "leaderHintQuickRetries")
	assert.Equal(t, d.ListPageSize, listPageSize, "listPageSize")

	// The constants are what a client gets when no option is given.
	c := idleClient(t)
	assert.Equal(t, DefaultRequestTimeout, c.cfg.requestTimeout)
	assert.Equal(t, DefaultBackoffBase, c.cfg.backoffBase)
	assert.Equal(t, DefaultBackoffMax, c.cfg.backoffMax)
	assert.Equal(t, DefaultDriftRate, c.cfg.driftRate)
	assert.Equal(t, DefaultMinMargin, c.cfg.minMargin)
	assert.Equal(t, DefaultKeepAlive, c.cfg.keepAlive)

	long := strings.Repeat("p", d.OwnerPrefixMaxLength+10)
	base := ownerBase(long)
	assert.True(t, strings.HasPrefix(base, long[:d.OwnerPrefixMaxLength]+"/"), "owner prefix cut to %d bytes: %q", d.OwnerPrefixMaxLength, base)
}

// idleClient returns a client that makes no call: for reading its settings.
func idleClient(t *testing.T) *Client {
	t.Helper()
	c, err := New([]string{"127.0.0.1:1"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestSpecBackoff(t *testing.T) {
	t.Parallel()
	s := loadSpec(t)
	c := idleClient(t)
	maxD := c.backoffCap(0)
	for _, row := range s.Backoff.Rows {
		d := msOf(row.MaxMs)
		lo, hi := d, time.Duration(0)
		for range 200 {
			got := backoff(min(c.cfg.backoffBase, maxD), maxD, row.Attempt)
			lo, hi = min(lo, got), max(hi, got)
		}
		assert.GreaterOrEqual(t, lo, d/2, "attempt %d: a delay below d/2 = %v", row.Attempt, d/2)
		assert.LessOrEqual(t, hi, d, "attempt %d: a delay above d = %v", row.Attempt, d)
		// Equal jitter spreads the delays over [d/2, d]: 200 draws that
		// all fall in one half of it would not be jitter.
		assert.Less(t, lo, d*3/4, "attempt %d: no delay in the lower half of [d/2, d]", row.Attempt)
		assert.Greater(t, hi, d*3/4, "attempt %d: no delay in the upper half of [d/2, d]", row.Attempt)
	}
}

func TestSpecLease(t *testing.T) {
	t.Parallel()
	s := loadSpec(t)
	c := idleClient(t)
	sent := time.Now()
	for _, row := range s.Lease.Rows {
		ttl := msOf(row.TTLMs)
		assert.InDelta(t, row.RenewAtMs, inMs(renewAt(sent, ttl).Sub(sent)), 0.001, "ttl %v: first renewal", ttl)
		assert.InDelta(t, row.DeadlineMs, inMs(c.localDeadline(sent, ttl).Sub(sent)), 0.001, "ttl %v: local deadline", ttl)
		spec := callSpec{op: "renew", timeout: c.cfg.requestTimeout}
		spec.boundRenewal(ttl)
		assert.InDelta(t, row.AttemptTimeoutMs, inMs(spec.timeout), 0.001, "ttl %v: attempt timeout of a renewal", ttl)
		assert.InDelta(t, row.BackoffCapMs, inMs(c.backoffCap(spec.backoff)), 0.001, "ttl %v: backoff cap of a renewal", ttl)
	}
}

// specFailures names the failure classes as the spec does.
var specFailures = map[string]failure{"final": failFinal, "retry": failRetry, "not_sent": failNotSent}

// specErrors names the sentinels as the spec's error column does; nil:
// no sentinel (the *connect.Error only).
var specErrors = map[string]error{
	"locked": ErrLocked, "not_held": ErrNotHeld, "session_not_found": ErrSessionNotFound,
	"limit_mismatch": ErrLimitMismatch, "invalid_argument": ErrInvalidArgument,
	"resource_exhausted": ErrResourceExhausted, "permission_denied": ErrPermissionDenied,
	"unauthenticated": ErrUnauthenticated, "unavailable": ErrUnavailable,
	"failed_precondition": nil, "watch_out_of_range": nil, "other": nil,
}

// specCode parses a row's code as the Connect protocol spells it.
func specCode(t *testing.T, r specRow) connect.Code {
	t.Helper()
	var code connect.Code
	require.NoError(t, code.UnmarshalText([]byte(r.Code)), "%v", r)
	return code
}

// serverError is the error a server sends for r.
func serverError(r specRow, code connect.Code) error {
	e := connect.NewError(code, errors.New("from the client spec"))
	var details []proto.Message
	if r.LeaderHint != nil {
		details = append(details, &ticketv1.LeaderHint{LeaderId: "n2", LeaderAddr: *r.LeaderHint})
	}
	if r.LimitMismatch != nil {
		details = append(details, &ticketv1.LimitMismatch{Limit: *r.LimitMismatch})
	}
	if r.WatchOldestIndex != nil {
		details = append(details, &ticketv1.WatchOutOfRange{OldestIndex: *r.WatchOldestIndex})
	}
	for _, m := range details {
		d, err := connect.NewErrorDetail(m)
		if err != nil {
			return err
		}
		e.AddDetail(d)
	}
	return e
}

// clientError is the error the client's own stack makes for r: a cut
// connection (what a reset stream or a timeout looks like).
func clientError(code connect.Code) error {
	return connect.NewError(code, io.ErrUnexpectedEOF)
}

// specServer answers GetLock with the server error of the row whose index
// is the request's key: the errors reach the client as every server's do,
// over HTTP.
type specServer struct {
	ticketv1connect.UnimplementedLockServiceHandler
	rows []specRow
}

func (s *specServer) GetLock(_ context.Context, req *ticketv1.GetLockRequest) (*ticketv1.GetLockResponse, error) {
	i, err := strconv.Atoi(req.GetKey())
	if err != nil || i < 0 || i >= len(s.rows) {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("no such row"))
	}
	r := s.rows[i]
	var code connect.Code
	if err := code.UnmarshalText([]byte(r.Code)); err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	return nil, serverError(r, code)
}

func TestSpecClassify(t *testing.T) {
	t.Parallel()
	rows := loadSpec(t).Classify.Rows
	require.NotEmpty(t, rows)
	mux := http.NewServeMux()
	mux.Handle(ticketv1connect.NewLockServiceHandler(&specServer{rows: rows}))
	srv := NewH2CServer(mux)
	t.Cleanup(srv.Close)
	hc := newHTTPClient(DefaultKeepAlive, nil)
	t.Cleanup(hc.CloseIdleConnections)

	for _, pr := range []struct {
		name string
		opts []connect.ClientOption
	}{{"connect", nil}, {"grpc", []connect.ClientOption{connect.WithGRPC()}}} {
		lc := ticketv1connect.NewLockServiceClient(hc, srv.URL, pr.opts...)
		refused := ticketv1connect.NewLockServiceClient(hc, "http://"+ClosedAddr(t), pr.opts...)
		for i, r := range rows {
			code := specCode(t, r)
			assert.Equal(t, r.GRPC, int(code), "%v: the gRPC number of %s", r, r.Code)
			var err error
			switch {
			case r.Transport == "connection_refused":
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err = refused.GetLock(ctx, &ticketv1.GetLockRequest{Key: "k"})
				cancel()
				require.ErrorIs(t, err, syscall.ECONNREFUSED, "%s %v", pr.name, r)
			case r.From == "server":
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err = lc.GetLock(ctx, &ticketv1.GetLockRequest{Key: strconv.Itoa(i)})
				cancel()
				require.Error(t, err)
				require.True(t, connect.IsWireError(err), "%s %v: not a server's answer: %v", pr.name, r, err)
			case r.From == "client":
				err = clientError(code)
			default:
				t.Fatalf("%v: from must be server or client", r)
			}
			checkSpecRow(t, pr.name, r, code, err)
		}
	}
}

// checkSpecRow checks how the SDK handles err, the failure of r.
func checkSpecRow(t *testing.T, protocol string, r specRow, code connect.Code, err error) {
	t.Helper()
	assert.Equal(t, code, connect.CodeOf(err), "%s %v: code", protocol, r)
	want, ok := specFailures[r.Retry]
	require.True(t, ok, "%v: unknown retry class", r)
	assert.Equal(t, want, classify(err), "%s %v: classify", protocol, r)
	assert.Equal(t, r.Hint, leaderHint(err), "%s %v: leaderHint", protocol, r)

	op := r.Op
	if op == "" {
		op = "get"
	}
	werr := wrapErr(op, "k", err)
	sentinel, ok := specErrors[r.Error]
	require.True(t, ok, "%v: unknown error name", r)
	for name, s := range specErrors {
		if s != nil {
			assert.Equal(t, s == sentinel, errors.Is(werr, s), "%s %v: errors.Is(%s): %v", protocol, r, name, werr)
		}
	}
	if r.LimitMismatch != nil {
		var lm *LimitMismatchError
		if assert.ErrorAs(t, werr, &lm, "%s %v", protocol, r) {
			assert.Equal(t, *r.LimitMismatch, lm.Limit, "%s %v: the key's limit", protocol, r)
		}
	}
}
