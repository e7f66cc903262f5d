package ticketdtest

import (
	"context"

	"connectrpc.com/connect"
)

// clientOptions are the connect options of the cluster's own clients: the
// bearer token of Options.BearerToken, if any.
func clientOptions(opts Options) []connect.ClientOption {
	if opts.BearerToken == "" {
		return nil
	}
	header := "Bearer " + opts.BearerToken
	return []connect.ClientOption{connect.WithInterceptors(connect.UnaryInterceptorFunc(
		func(next connect.UnaryFunc) connect.UnaryFunc {
			return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
				req.Header().Set("Authorization", header)
				return next(ctx, req)
			}
		}))}
}
