package httpapi_test

import (
	"context"
	"testing"
	"time"
)

// safety bounds waits for asynchronous effects; assertions never depend on it.
const safety = 15 * time.Second

// ctxT is a context that ends after safety or with the test.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	t.Cleanup(cancel)
	return ctx
}
