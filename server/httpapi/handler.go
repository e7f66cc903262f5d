package httpapi

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"go.uber.org/zap"

	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/server/console"
	"github.com/ticketd/ticketd/server/internal/peerpb/peerpbconnect"
)

// This file builds the client API's handler: what is mounted on the port
// and which layers every request passes on its way to it.

// CompressMinBytes is the smallest message connect compresses (bytes), on
// the API and on a follower's forwarding client alike: replies are tens of
// bytes, and gzip would cost more CPU than it saves.
const CompressMinBytes = 4096

// maxRequestBytes bounds a request message (bytes); larger ones are refused
// with ResourceExhausted before they are decoded.
const maxRequestBytes = 1 << 20

// handler builds the HTTP handler: both services and, when set, the peer
// service (its answers written within PeerCallLimit, writelimit.go), health, reflection, the web console, the probes and, unless it
// has its own listener (listen_metrics_addr), /metrics. Around it, from the outside in: the
// unary calls served on the workers (workerpool.go), the write bound on
// each message of a stream (streamwrite.go), the write bound on an
// HTTP/1.x unary call's response (http1write.go), CORS when origins are
// allowed (cors.go), the caller recorded for the audit log
// (auditcaller.go), the request-body read timeout, or a client stream's
// idle limit (bodytimeout.go, bidistream.go), the
// hints for malformed calls (hints.go) and the routes of the API's
// procedures, which skip the mux (procroutes.go).
func (s *Server) handler(c Config) http.Handler {
	opts := []connect.HandlerOption{
		connect.WithInterceptors(c.Metrics, loggingInterceptor(c.Log.Named("rpc")), c.Auth.Interceptor()),
		connect.WithRecover(recoverPanic(c.Log)),
		connect.WithCompressMinBytes(CompressMinBytes),
		connect.WithReadMaxBytes(maxRequestBytes),
	}
	mux := http.NewServeMux()
	lockPath, lockHandler := ticketv1connect.NewLockServiceHandler(c.LockService, opts...)
	clusterPath, clusterHandler := ticketv1connect.NewClusterServiceHandler(c.ClusterService, opts...)
	services := map[string]http.Handler{lockPath: lockHandler, clusterPath: clusterHandler}
	for path, h := range services {
		mux.Handle(path, h)
	}
	if c.PeerService != nil {
		path, h := peerpbconnect.NewPeerServiceHandler(c.PeerService, opts...)
		mux.Handle(path, withWriteLimit(c.PeerCallLimit, h))
	}
	mux.Handle(grpchealth.NewHandler(s.health, opts...))
	reflector := grpcreflect.NewStaticReflector(
		ticketv1connect.LockServiceName,
		ticketv1connect.ClusterServiceName,
		grpchealth.HealthV1ServiceName,
	)
	mux.Handle(grpcreflect.NewHandlerV1(reflector, opts...))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector, opts...))
	mux.Handle(console.Path, console.Handler()) // the web console at /ui/
	mux.HandleFunc(LivezPath, s.livez)          // probes.go
	mux.HandleFunc(ReadyzPath, s.readyz)        // probes.go
	if c.Config.ListenMetricsAddr == "" {
		mux.Handle("/metrics", s.metricsHandler)
	}
	body := ms(c.Config.Limits.BodyReadTimeoutMS)
	api := withProcedureRoutes(slices.Collect(maps.Keys(apiMethods())), services, mux)
	idle := ms(c.Config.Limits.IdleTimeoutMS)
	h := withCORS(c.Config.CORSAllowedOrigins, withCaller(withBodyTimeout(body, idle, clientStreamProcedures(), withHints(api))))
	write, streams := ms(c.Config.Limits.StreamWriteTimeoutMS), apiStreams()
	h = withHTTP1WriteLimit(write, streams, h) // http1write.go
	return s.workers.wrap(withStreamWriteLimit(write, streams, c.Log.Named("http"), h))
}

// apiStreams is the paths of every procedure mounted here that sends a
// stream: Watch, Snapshot, PeerService's LeaseRemaining, gRPC health's
// Watch and reflection's (bidirectional) ServerReflectionInfo.
func apiStreams() map[string]bool {
	return streamProcedures(map[string]string{
		ticketv1connect.LockServiceName:    ticketv1connect.LockServiceName,
		ticketv1connect.ClusterServiceName: ticketv1connect.ClusterServiceName,
		peerpbconnect.PeerServiceName:      peerpbconnect.PeerServiceName,
		// grpchealth and grpcreflect register their copies of gRPC's
		// schemas under a package of their own (to stay clear of
		// grpc-go's), and serve v1alpha reflection with v1's.
		grpchealth.HealthV1ServiceName:        "connectext." + grpchealth.HealthV1ServiceName,
		grpcreflect.ReflectV1ServiceName:      "connectext." + grpcreflect.ReflectV1ServiceName,
		grpcreflect.ReflectV1AlphaServiceName: "connectext." + grpcreflect.ReflectV1ServiceName,
	})
}

// recoverPanic answers a handler's panic with Internal, logging it with
// its stack to log: one request fails, the node goes on.
func recoverPanic(log *zap.Logger) func(context.Context, connect.Spec, http.Header, any) error {
	return func(_ context.Context, spec connect.Spec, _ http.Header, p any) error {
		log.Error("handler panic", zap.String("procedure", spec.Procedure), zap.Any("panic", p), zap.StackSkip("stack", 3))
		return connect.NewError(connect.CodeInternal, errors.New("internal error"))
	}
}

// Handler is the API's HTTP handler (both services, health, reflection,
// the console, the probes and, without listen_metrics_addr, /metrics), for
// callers that run their own http.Server.
func (s *Server) Handler() http.Handler { return s.api.Handler }

// MetricsHandler serves the node's Prometheus metrics (Config.Registry) at
// any path.
func (s *Server) MetricsHandler() http.Handler { return s.metricsHandler }
