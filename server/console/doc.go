// Package console is ticketd's web console: the static files of a small
// TypeScript app (built from sdk/ts/console with the @ticketd/client
// package and esbuild), embedded in the binary and served at /ui/ by every
// node. The page shows the members (leader, term, commit and applied
// index, health), the locks under a prefix with a live remaining-lease bar
// kept current by Watch, the recent events, and lets an admin release a
// lock (with a bearer token typed in the page when authorization is on).
//
// The files under dist/ are generated, like the protobuf code, and
// committed: `make console` rebuilds them, and sdk/ts's tests fail when
// they are stale (a deterministic rebuild compared byte for byte).
//
// # Usage
//
// The server mounts Handler on its API mux:
//
//  1. mux.Handle(console.Path, console.Handler()) — console.Path is "/ui/".
//
//  2. Nothing else: the page calls the API of the node that served it (the
//     node forwards writes to the leader). Per-node figures of the other
//     members need those members to allow this node's origin
//     (--cors-allowed-origins); without it they show as unreachable.
//
//     mux := http.NewServeMux()
//     mux.Handle(console.Path, console.Handler())
package console
