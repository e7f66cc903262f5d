// Package peer runs the benchmark's peer — etcd itself, three embedded members
// on loopback, with client/v3's concurrency.Mutex doing the same Acquire+Release
// workload as ticketd — and reads back its figures.
//
// The peer lives in its own module, bench/etcdpeer, outside go.work: etcd's
// server module requires newer versions of modules the product also uses
// (otel, x/sys, zap, grpc), and go.work selects one version of each module for
// every workspace module, so listing it there would change what ticketd
// builds with. This package builds it with `GOWORK=off go build` into a cache
// directory (keyed by a hash of its sources) and runs it as a subprocess that
// prints one Output as JSON on stdout.
//
// # Usage
//
//  1. Call Build once; it returns the binary's path (built only when its
//     sources changed). Building needs the Go toolchain and the module proxy
//     the first time.
//  2. Call Run with the binary and a Config for each round; it returns the
//     peer's Output (one load.Result per concurrency level).
//  3. bench/etcdpeer prints exactly an Output, so both sides share this type.
//
// Example:
//
//	bin, err := peer.Build(ctx, peer.BuildConfig{})
//	out, err := peer.Run(ctx, bin, peer.Config{Concurrency: []int{1, 16}, Duration: time.Second})
//	for _, r := range out.Results { fmt.Println(r.Concurrency, r.PerSec) }
package peer
