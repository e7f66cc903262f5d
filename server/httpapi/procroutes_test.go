package httpapi

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
)

// procedureMux is the API's mux in miniature: a handler that records its
// name and the pattern the mux matched (Request.Pattern) at each service
// prefix, and one at "/" for everything else.
func procedureMux() (mux *http.ServeMux, services map[string]http.Handler, got *[2]string) {
	got = new([2]string)
	named := func(name string) http.Handler {
		return http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { *got = [2]string{name, r.Pattern} })
	}
	mux = http.NewServeMux()
	services = map[string]http.Handler{
		"/" + ticketv1connect.LockServiceName + "/":    named("lock"),
		"/" + ticketv1connect.ClusterServiceName + "/": named("cluster"),
	}
	for path, h := range services {
		mux.Handle(path, h)
	}
	mux.Handle("/", named("other"))
	return mux, services, got
}

// TestProcedureRoutes: every procedure of both services reaches the
// handler the mux has at its service's prefix, without the mux (no pattern
// is matched, as with the mux Request.Pattern would be the prefix); any
// other path, one that names no procedure, and one the mux would clean
// first, goes through the mux as before.
func TestProcedureRoutes(t *testing.T) {
	mux, services, got := procedureMux()
	procedures := slices.Collect(maps.Keys(apiMethods()))
	require.Contains(t, procedures, ticketv1connect.LockServiceAcquireProcedure)
	require.Contains(t, procedures, ticketv1connect.ClusterServiceStatusProcedure)
	h := withProcedureRoutes(procedures, services, mux)
	serve := func(path string) [2]string {
		*got = [2]string{}
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, path, nil))
		return *got
	}
	for _, path := range procedures {
		want := "lock"
		if strings.HasPrefix(path, "/"+ticketv1connect.ClusterServiceName+"/") {
			want = "cluster"
		}
		assert.Equal(t, [2]string{want, ""}, serve(path), "%s: its service's handler, without the mux", path)
	}
	assert.Equal(t, [2]string{"lock", "/ticket.v1.LockService/"}, serve("/ticket.v1.LockService/Lock"), "no such procedure: the mux")
	assert.Equal(t, [2]string{"other", "/"}, serve("/readyz"))
	*got = [2]string{}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/x/../ticket.v1.LockService/Acquire", nil))
	assert.Equal(t, http.StatusTemporaryRedirect, rec.Code, "a path to clean: the mux redirects it")
	assert.Equal(t, [2]string{}, *got, "and serves nothing")
}

// BenchmarkProcedureRoute is the dispatch of one Acquire call: through the
// mux ("mux") and through the procedure routes ("routes").
func BenchmarkProcedureRoute(b *testing.B) {
	mux, services, _ := procedureMux()
	for _, bc := range []struct {
		name string
		h    http.Handler
	}{
		{"mux", mux},
		{"routes", withProcedureRoutes(slices.Collect(maps.Keys(apiMethods())), services, mux)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := httptest.NewRequest(http.MethodPost, ticketv1connect.LockServiceAcquireProcedure, nil)
			w := httptest.NewRecorder()
			b.ReportAllocs()
			for b.Loop() {
				bc.h.ServeHTTP(w, r)
			}
		})
	}
}
