package httpapi

import (
	"context"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/zap"

	"github.com/ticketd/ticketd/server/forward"
)

// loggingInterceptor logs every unary RPC with typed zap fields: at Debug on
// success and for the expected client-facing codes, at Warn for Internal and
// Unknown (a bug or a backend failure).
func loggingInterceptor(log *zap.Logger) connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			start := time.Now()
			res, err := next(ctx, req)
			code := connect.Code(0)
			if err != nil {
				code = connect.CodeOf(err)
			}
			lvl := zap.DebugLevel
			if code == connect.CodeInternal || code == connect.CodeUnknown {
				lvl = zap.WarnLevel
			}
			if ce := log.Check(lvl, "rpc"); ce != nil {
				fields := []zap.Field{
					zap.String("procedure", req.Spec().Procedure),
					zap.String("peer", req.Peer().Addr),
					zap.Duration("duration", time.Since(start)),
					zap.Bool("forwarded", req.Header().Get(forward.Header) != ""),
				}
				if err != nil {
					fields = append(fields, zap.String("code", code.String()), zap.Error(err))
				}
				ce.Write(fields...)
			}
			return res, err
		}
	}
}
