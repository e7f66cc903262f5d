// Package apifuzz holds fuzz targets for ticketd's API request validation,
// driven over real HTTP against one in-process ticketd node (server.New with
// the hashicorp backend on badger in a temporary directory, serving on a
// loopback port). It has no non-test code; see fuzz_test.go.
//
// The targets check what docs/design.md#security-model promises of bad
// input (a clear error, nothing changed; docs/api.md#errors): a request whose
// fields are out of bounds (empty, oversized or non-UTF-8 key or owner,
// lease_ms outside the configured bounds, token 0) is refused with
// InvalidArgument and changes nothing; a request within bounds is never
// refused with InvalidArgument; no request, however malformed its bytes,
// makes the server answer Internal or Unknown (a handler panic) or stop
// serving. The fields and RPCs of shared locks, semaphores and sessions are
// covered the same way: an Acquire's
// mode (no such mode), limit (above 4096, or with the shared mode) and
// session, and CreateSession (ttl_ms outside the lease bounds),
// KeepAlive and CloseSession (session 0) are refused with InvalidArgument
// and change nothing; an unknown session is NotFound, never Internal. The core engineer's targets cover the command decoder and
// snapshot restore.
//
// # Usage
//
//  1. `go test ./apifuzz` runs the seed corpus (a node starts once, about a second).
//  2. `go test ./apifuzz -run '^$' -fuzz FuzzLockRequests -fuzztime 1m` fuzzes
//     typed requests; FuzzRawRequests fuzzes raw bodies of every
//     LockService procedure in the Connect protocol (proto and JSON).
//  3. A failing input lands in testdata/fuzz/<Target>/ and is replayed by
//     every later `go test`.
//
// Example:
//
//	cd faults && go test ./apifuzz -run '^$' -fuzz FuzzRawRequests -fuzztime 30s
package apifuzz
