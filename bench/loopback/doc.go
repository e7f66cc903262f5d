// Package loopback hands out free TCP addresses on 127.0.0.1 for the clusters
// the benchmark starts, so that runs never collide with each other or with
// other programs on the machine.
//
// # Usage
//
//  1. Call FreeAddrs(n) for the n addresses a cluster needs.
//  2. Bind them soon: the ports are released when FreeAddrs returns, so
//     another program could take one in between (the bind then fails and says so).
//
// Example:
//
//	addrs, err := loopback.FreeAddrs(3) // ["127.0.0.1:41235", ...]
package loopback
