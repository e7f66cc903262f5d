// Package loopback hands out free TCP addresses on 127.0.0.1 for the clusters
// the benchmark starts, so that runs never collide with each other or with
// other programs on the machine.
//
// # Usage
//
//  1. Call FreeAddrs(n) for the n addresses a cluster needs.
//  2. Bind them soon: the ports are released when FreeAddrs returns; they lie
//     below the ephemeral range, so only another program binding that very
//     port could take one in between (the bind then fails and says so).
//
// Example:
//
//	addrs, err := loopback.FreeAddrs(3) // ["127.0.0.1:27235", ...]
package loopback
