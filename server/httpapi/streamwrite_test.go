package httpapi

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/server/internal/peerpb/peerpbconnect"
)

// TestAPIStreamsAreEveryStream: the write bound of streams
// (limits.stream_write_timeout_ms) applies to every procedure mounted on
// the API port that sends a stream, read from the descriptors: gRPC
// reflection's v1alpha included, which has no descriptor registered of its
// own; and to no unary procedure, whose answer net/http writes after the
// handler returns.
func TestAPIStreamsAreEveryStream(t *testing.T) {
	const reflect = "/ServerReflectionInfo"
	require.Equal(t, map[string]bool{
		ticketv1connect.LockServiceWatchProcedure:             true,
		ticketv1connect.LockServiceKeepAliveStreamProcedure:   true,
		ticketv1connect.ClusterServiceSnapshotProcedure:       true,
		peerpbconnect.PeerServiceLeaseRemainingProcedure:      true,
		"/" + grpchealth.HealthV1ServiceName + "/Watch":       true,
		"/" + grpcreflect.ReflectV1ServiceName + reflect:      true,
		"/" + grpcreflect.ReflectV1AlphaServiceName + reflect: true,
	}, apiStreams())
	for path := range unaryProcedures() {
		require.False(t, apiStreams()[path], path)
	}
}

// BenchmarkStreamMessage is the cost of writing one small stream message
// (a write and a flush, as connect-go sends a watch event) through a
// streamWriter, against the bare ResponseWriter: the bound's own
// bookkeeping (its lock and the reset of its timer per message) beside a
// writer that costs next to nothing.
func BenchmarkStreamMessage(b *testing.B) {
	msg := make([]byte, 64)
	send := func(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
		rec.Body.Reset()
		_, _ = w.Write(msg)
		w.(http.Flusher).Flush()
	}
	b.Run("bare", func(b *testing.B) {
		rec := httptest.NewRecorder()
		for b.Loop() {
			send(rec, rec)
		}
	})
	b.Run("bounded", func(b *testing.B) {
		rec := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, ticketv1connect.LockServiceWatchProcedure, nil)
		sw := newStreamWriter(rec, r, time.Minute, zap.NewNop())
		defer sw.finish()
		for b.Loop() {
			send(sw, rec)
		}
	})
}
