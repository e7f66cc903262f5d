package httpapi

import (
	"bufio"
	"net"
)

// This file buffers the reads of the client API's plaintext connections.
//
// net/http's HTTP/2 server reads frames straight from the connection, with
// no buffer between: every frame is two read system calls, one for its
// 9-byte header and one for its payload (RFC 9113 §4.1), so a unary call
// (a HEADERS and a DATA frame, and the client's WINDOW_UPDATE and PING
// frames besides) cost four or more reads of a few tens of bytes each on
// the connection's reader goroutine. With the calls of many clients
// multiplexed on one connection, the frames of several calls are already
// waiting in the socket together. A buffer under the connection takes all
// of them with one read, and the frame reader's small reads are then
// copies. net/http's HTTP/1.x server and its HTTP/2 client buffer their
// reads the same way (bufio.Reader, 4 KiB), and so does crypto/tls, which
// is why only the plaintext (h2c) connections need this: under TLS the
// record layer already reads as much as has arrived.

// readBufferBytes is the size of a connection's read buffer (bytes): the
// size net/http's own connection readers use, and what a few dozen
// concurrent unary calls send at once (about 100–200 bytes each: a HEADERS
// frame of HPACK-indexed fields and a small DATA frame). At the connection
// cap (limits.max_connections, 4096 by default) the buffers hold at most
// 16 MiB. A read of at least this size (a large request body) bypasses the
// buffer.
const readBufferBytes = 4 << 10

// readBufferedListener returns l whose accepted connections buffer their
// reads (readBufferedConn).
func readBufferedListener(l net.Listener) net.Listener { return bufferedListener{l} }

type bufferedListener struct{ net.Listener }

func (l bufferedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &readBufferedConn{Conn: c}, nil
}

// readBufferedConn is a net.Conn whose Read makes at most one read of the
// connection, into a buffer of readBufferBytes allocated on the first Read
// (a connection refused by the cap never reads), and answers later Reads
// from that buffer until it is drained. Writes, deadlines and Close are the
// connection's. A read deadline that passes while bytes are buffered does
// not hide them: they arrived before it. Like any net.Conn, it expects one
// reader at a time (net/http never reads a connection from two goroutines
// at once).
type readBufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *readBufferedConn) Read(p []byte) (int, error) {
	if c.r == nil {
		c.r = bufio.NewReaderSize(c.Conn, readBufferBytes)
	}
	return c.r.Read(p)
}
