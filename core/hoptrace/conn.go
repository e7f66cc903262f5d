package hoptrace

import (
	"fmt"
	"net"
)

// Conn returns c whose Reads (that return bytes) and Writes are marked
// with label: "<prefix>.read" at a Read's return, "<prefix>.write" at a
// Write's start and "<prefix>.wrote" at its end. c itself when off.
func Conn(c net.Conn, label, prefix string) net.Conn {
	if !On {
		return c
	}
	return &conn{Conn: c, label: label, prefix: prefix}
}

type conn struct {
	net.Conn
	label, prefix string
}

func (c *conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		Mark(c.label, c.prefix+".read")
	}
	return n, err
}

func (c *conn) Write(p []byte) (int, error) {
	Mark(c.label, c.prefix+".write")
	if On && len(p) >= 9 {
		Mark(c.label, fmt.Sprintf("%s.w.t%d.f%x.l%d.n%d", c.prefix, p[3], p[4], int(p[0])<<16|int(p[1])<<8|int(p[2]), len(p)))
	}
	n, err := c.Conn.Write(p)
	Mark(c.label, c.prefix+".wrote")
	return n, err
}
