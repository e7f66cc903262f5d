package sdk

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Loopback servers and addresses for the tests of package sdk and of its
// external tests (package sdk_test), which see these exported names too.

// NewH2CServer starts an httptest server for h that speaks HTTP/1.1 and
// HTTP/2 without TLS (h2c), as a ticketd API port does; the caller closes
// it.
func NewH2CServer(h http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	return srv
}

// ClosedAddr returns a loopback host:port nothing listens on.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
