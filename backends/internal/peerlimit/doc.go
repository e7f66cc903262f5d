// Package peerlimit caps the open connections of a node's Raft peer port,
// for both backends' transports (docs/security.md#peer-transport-bounds:
// uncapped, idle connections to the peer port exhausted the process's file
// descriptors and the client API stopped answering).
//
// A Listener wraps the peer port's TCP listener, below TLS. It accepts a
// connection first and then decides, like the client API's cap
// (server/httpapi/connlimit.go): within Config.MaxConns open connections in total and
// Config.MaxConnsPerIP from the newcomer's IP, it is admitted; past either,
// room is made only by closing the oldest connection of the same scope that
// has not been marked established (MarkEstablished: its TLS handshake done,
// or its first request answered) and has been open longer than
// Config.Grace; when there is none, the newcomer is refused (closed at
// once). An established peer is never shed for a newcomer. Each refusal is
// counted as kind "refused" through Config.Count (backends.PeerObserver)
// and logged at Warn, at most once per Config.LogEvery with the number of
// refusals since the last line.
//
// The cap bounds how many connections exist; how long each may stay silent
// is bounded by the transports themselves (TLS handshake deadline, read
// idle deadline, per-message read deadline).
//
// Usage:
//
//	ln, _ := net.Listen("tcp", addr)
//	ln = peerlimit.NewListener(ln, peerlimit.Config{MaxConns: 256, MaxConnsPerIP: 32, Log: log, Count: count})
//	c, _ := ln.Accept()
//	// ... after the TLS handshake or the first answered request:
//	peerlimit.MarkEstablished(c)
package peerlimit
