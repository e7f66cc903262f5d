// Package securitytest makes the certificates a test cluster needs, the way
// `ticketctl cert` makes them for operators (like net/http/httptest for
// servers): a CA, one node certificate per node id for loopback, and client
// certificates whose CN is the principal.
//
// # Usage
//
// The caller:
//
//  1. calls Certs with its testing.TB, the node ids and any client names;
//
//  2. passes the returned directory to the cluster it starts (for instance
//     sdk/ticketdtest.TLS.CertsDir), which reads ca.crt, node-<id>.crt/.key
//     and client.<name>.crt/.key from it.
//
//     dir := securitytest.Certs(t, []string{"n1", "n2", "n3"}, "orders-svc")
//     cl := ticketdtest.Start(t, ticketdtest.Options{TLS: &ticketdtest.TLS{CertsDir: dir, Peer: true}})
package securitytest
