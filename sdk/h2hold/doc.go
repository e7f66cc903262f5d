// Package h2hold sends an HTTP/2 HEADERS frame in one write system call
// with the DATA frame that follows it, on plaintext HTTP/2 (h2c)
// connections, for servers and clients alike.
//
// Go's HTTP/2 implementations (net/http's server and client transports)
// flush the buffered connection after a HEADERS frame that does not end its
// stream, and only then write the stream's DATA frame: a response whose
// body follows leaves the server in two writes, and a request whose body
// follows leaves the client in two writes. Each write wakes the peer's
// frame reader, so every unary call costs the peer two wake-ups where one
// would do (docs/benchmarks.md, "Where a lock cycle's time goes at one
// client"). gRPC-Go writes the frames of a message together (its "loopy"
// writer); net/http has no option for it.
//
// A Conn holds a write that is exactly one such HEADERS frame (LoneHeaders)
// and writes it in one system call with the next write (copied behind it),
// normally that stream's DATA frame a few microseconds later, or alone
// after Config.Hold (DefaultHold) when nothing follows in time (a Watch
// whose server waits for a change, a request body the caller has not
// written yet). Nothing is reordered: whatever the connection writes next
// goes out after the held bytes.
//
// Only HTTP/2 connections are held: a server's connection whose first read
// is the client connection preface (RFC 9113 §3.4), a client's whose first
// write is. Other connections (HTTP/1.x, and TLS, whose frames are not
// visible below crypto/tls: a TLS connection's first bytes are a
// ClientHello) write as before. A server's connection is recognised only
// when its first read returns the whole 24-byte preface: read it through
// a buffer of at least that size (the API listener reads through 4 KiB).
// net/http's own first read asks for fewer bytes, so a Conn under a bare
// net/http server, or a client whose preface arrives split, is treated as
// not HTTP/2 and is neither held nor write-bounded by the Conn (net/http's
// own deadlines apply).
//
// With a Config.WriteLimit, an HTTP/2 Conn also bounds its own writes, as
// http.HTTP2Config.WriteByteTimeout does, and ignores the write deadlines
// set from above: net/http's HTTP/2 server sets one before every write
// and clears it after, two updates of the runtime's deadline timer per
// flush, where the Conn sets the deadline again only when the last setting
// is older than WriteLimit/16.
package h2hold
