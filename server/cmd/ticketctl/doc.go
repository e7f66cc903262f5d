// Command ticketctl is the command-line client of a ticketd cluster: it
// acquires, renews, releases, inspects and checks locks, shows cluster
// status, changes membership and moves leadership. It is built on the Go
// SDK (github.com/ticketd/ticketd/sdk), so it finds the leader, follows
// leader hints and retries through elections like any SDK client.
//
// # Usage
//
//	ticketctl [--endpoints 127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003] [-o text|json|value] [--timeout 15s] [--grpc] COMMAND
//
//	lock acquire KEY --ttl 10s [--wait] [--owner X] [--shared | --limit N] [--session ID]
//	lock renew KEY TOKEN
//	lock release KEY TOKEN
//	lock get KEY [--stale]                (every holder, mode and limit)
//	lock list [--prefix P] [--stale]      (one row per holder)
//	lock check KEY TOKEN
//	lock acquire KEY --hold              (renew until Ctrl-C, then release)
//	lock run KEY [--ttl] [--wait] [--kill-timeout 10s] [--pass-token] [--shared | --limit N] -- CMD ARGS...
//	session create --ttl 10s | keepalive ID | close ID | get ID | list [--prefix P] [--principal NAME]
//	session run --ttl 30s [--kill-timeout 10s] [--pass-token] -- CMD ARGS...
//	watch [PREFIX] [--from INDEX] [--existing] [--stale]
//	elect NAME VALUE [--kill-timeout 10s] [--pass-token] -- CMD ARGS...
//	elect --observe NAME                 (print each leader as it changes)
//	version
//	status [--all]
//	members list | add ID RAFT_ADDR API_ADDR | remove ID
//	transfer-leader [ID]
//	endpoint health                      (each endpoint's /readyz and gRPC health, as etcdctl's)
//
// Every global flag has an environment variable, which the flag overrides:
// TICKETD_ENDPOINTS, TICKETD_OUTPUT, TICKETD_TIMEOUT, TICKETD_GRPC,
// TICKETD_CACERT, TICKETD_CLIENT_CERT (--cert), TICKETD_CLIENT_KEY (--key;
// not TICKETD_KEY, which "lock run" gives its command as the lock's name,
// nor ticketd's TICKETD_KEY_FILE, the node's own key) and TICKETD_TOKEN
// (--token: the bearer token everywhere; the command of "lock run", "elect"
// and "session run" gets it only with --pass-token, and its fencing token as
// TICKETD_FENCING_TOKEN).
//
// Output: -o text is for people and may change; -o json is the API's own
// JSON (protojson of the API's messages: lowerCamelCase field names such as
// leaseMs, 64-bit integers as strings), one object per line, and errors go
// to stderr as {"code","message","exitCode"}; -o value prints the one value
// a script wants (lock acquire, renew, get, check: a token; list: keys;
// status: the leader's id; members: ids).
//
// Errors are one line: "ticketctl: ", the operation, the server's code once
// and its sentence, in ticketctl's terms where a flag set the value:
//
//	ticketctl: acquire "jobs/a": already_exists: key "jobs/a" is held by another owner
//	ticketctl: --ttl: invalid_argument: lease 50ms is outside the allowed range 100ms to 10m0s
//	ticketctl: renew "jobs/a": not_found: no lock on "jobs/a" with token 7: lease expired or released
//
// The caller's duties:
//
//  1. Point --endpoints (or TICKETD_ENDPOINTS) at one or more API addresses
//     of the cluster; any reachable node will do.
//  2. Keep a lock acquired with "lock acquire" alive with "lock renew KEY
//     TOKEN" more often than its TTL: ticketctl exits after acquiring and
//     does not renew in the background.
//  3. Retry a failed acquire with the same --owner: a retry returns the
//     grant an earlier, ambiguous attempt may have produced (exit code 4).
//  4. Read results with -o json or -o value in scripts; human output may change.
//
// Exit codes (distinct, as etcdctl's and consul's, so that a typo is never
// read as an answer):
//
//	0   success
//	1   any other failure (cluster unreachable, TLS, I/O, a refused value);
//	    a cause of ticketctl's settings (plaintext to a TLS port, an
//	    untrusted certificate, no client certificate, every endpoint
//	    refusing) fails at once, naming the flag to fix
//	2   the key is held by someone else (acquire without --wait; lock run)
//	3   no lock with that token (lease expired or released); "check": the token is not current; no such session
//	4   outcome unknown: retry with the same --owner
//	5   lease lost while held (lock run, elect, session run, --hold): the
//	    command's process group got SIGTERM, SIGKILL after --kill-timeout
//	6   permission denied
//	7   unauthenticated
//	8   still held when --wait ran out of --timeout; nothing was acquired
//	64  usage (EX_USAGE): unknown command or flag, stray or missing argument, bad value
//
// "lock run", "elect" and "session run" otherwise exit with their command's
// status (128+N for signal N), or 128+N when ticketctl itself got signal N
// (SIGINT, SIGTERM), which it passed to the command's process group.
// "status" exits 0 whenever a node answered, also while it replays its log.
//
// Shared locks, semaphores and sessions
// (docs/semantics.md#shared-locks-semaphores-and-sessions): --shared holds
// a key shared (readers-writer), --limit N takes one of N slots of a counting
// semaphore ("lock run --limit 2 --wait -- CMD" runs at most two copies of
// CMD cluster-wide), and every holder gets its own fencing token. A session
// (session create) is one lease for many locks acquired with --session ID;
// "session keepalive ID" renews them all, "session close ID" releases them
// all in one entry.
//
// Example:
//
//	tok=$(ticketctl -o value lock acquire jobs/nightly --ttl 30s --owner "$HOSTNAME")
//	ticketctl lock renew jobs/nightly "$tok"
//	ticketctl lock release jobs/nightly "$tok"
package main
