// Command ticketctl is the command-line client of a ticketd cluster: it
// acquires, renews, releases, inspects and checks locks, shows cluster
// status, changes membership and moves leadership. It is built on the Go
// SDK (github.com/ticketd/ticketd/sdk), so it finds the leader, follows
// leader hints and retries through elections like any SDK client.
//
// # Usage
//
//	ticketctl [--endpoints 127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003] [-o json] [--timeout 15s] [--grpc] COMMAND
//
//	lock acquire KEY --ttl 10s [--wait] [--owner X]
//	lock renew KEY TOKEN
//	lock release KEY TOKEN
//	lock get KEY [--stale]
//	lock list [--prefix P] [--stale]
//	lock check KEY TOKEN
//	lock acquire KEY --hold              (renew until Ctrl-C, then release)
//	lock run KEY [--ttl] [--wait] [--kill-grace] -- CMD ARGS...
//	watch [PREFIX] [--from INDEX] [--existing] [--stale]
//	elect NAME VALUE -- CMD ARGS...
//	status [--all]
//	members list | add ID RAFT_ADDR API_ADDR | remove ID
//	transfer-leader [ID]
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
//  4. Read results with -o json in scripts; human output may change.
//
// Exit codes: 0 success, 1 failure, 2 key held by someone else, 3 no lock
// with that token (or "check": token not current), 4 outcome unknown, 5
// lease lost while held (lock run, elect, --hold). "lock run" and "elect"
// otherwise exit with their command's status.
//
// Example:
//
//	tok=$(ticketctl -o json lock acquire jobs/nightly --ttl 30s --owner "$HOSTNAME" | jq -r .token)
//	ticketctl lock renew jobs/nightly "$tok"
//	ticketctl lock release jobs/nightly "$tok"
package main
