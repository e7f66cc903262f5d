#!/usr/bin/env bash
# cluster.sh — start a local three-node ticketd cluster (what `make run` runs).
#
#   BACKEND=hashicorp|etcd  consensus backend (default: the one $DATA was made
#                           with, else hashicorp)
#   LOG_STORE=wal|badger    Raft log store (--raft-log-store; default: the one
#                           $DATA was made with, else none is passed and each
#                           node keeps its data dir's store, wal for a new one)
#   DATA=./data             data root: node data in $DATA/nX, logs in $DATA/nX.log
#   TICKETD=bin/ticketd     the ticketd binary
#   TICKETCTL=bin/ticketctl the ticketctl binary (it makes the certificates)
#   SECURE=1                client TLS and client-certificate auth on the API
#                           too, and authorization on: $DATA/certs/policy.yaml
#                           gives the client certificate "root" admin and the
#                           bearer token in $DATA/certs/orders-svc.token lock
#                           on orders/. Remembered in $DATA/SECURE: later runs
#                           stay secure until 'make clean'
#   API_ADDRS, RAFT_ADDRS   the three nodes' client API and peer addresses,
#                           comma-separated (default 127.0.0.1:7001-7003 and
#                           127.0.0.1:7101-7103); other API addresses are
#                           named in the ticketctl commands it prints
#                           (TICKETD_ENDPOINTS)
#   METRICS_ADDRS           with SECURE, the three nodes' plaintext probe and
#                           metrics addresses (default 127.0.0.1:9101-9103)
#   READY_TIMEOUT=60        restart: seconds to wait for the node's /readyz
#   STOP_TIMEOUT=20         seconds a node has to stop after SIGTERM before
#                           it gets SIGKILL (ticketd bounds its own shutdown
#                           at 10 s)
#
# Peers always speak mutual TLS: a CA and one certificate per node (CN = the
# node id) that `ticketctl cert` makes once under $DATA/certs/. Without
# SECURE the client API stays plaintext on loopback.
#
#   scripts/cluster.sh               start the cluster and supervise it
#   scripts/cluster.sh restart nX    restart one node of the running cluster
#                                    (SIGTERM, then the same command; `make node N=nX`)
#                                    and wait until it answers /readyz 200
#
# The supervisor prints each node's exact command, so a node can also be
# restarted by hand, and keeps running while any node it started or
# restarted (pid in $DATA/nX.pid) is up or a node's API port is taken.
#
# Nodes n1..n3 serve the client API on 127.0.0.1:7001-7003 and peer (Raft)
# traffic on 127.0.0.1:7101-7103. A second run reuses the data (the bootstrap
# list only applies to empty data dirs) and its banner says so. kill -9 of
# one node leaves the other two serving; Ctrl-C stops them all.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=node-pid.sh
. scripts/node-pid.sh

DATA=${DATA:-data}
IDS=(n1 n2 n3)
# reused: the nodes whose data dir already holds state from an earlier run,
# taken before anything is written under $DATA.
reused=()
for id in "${IDS[@]}"; do
	if [[ -d $DATA/$id && -n $(ls -A "$DATA/$id" 2>/dev/null) ]]; then reused+=("$id"); fi
done
READY_TIMEOUT=${READY_TIMEOUT:-60}
STOP_TIMEOUT=${STOP_TIMEOUT:-20}
if [[ ! $READY_TIMEOUT =~ ^[0-9]+$ || ! $STOP_TIMEOUT =~ ^[0-9]+$ ]]; then
	echo "cluster.sh: READY_TIMEOUT and STOP_TIMEOUT are whole seconds (got '$READY_TIMEOUT', '$STOP_TIMEOUT')" >&2
	exit 2
fi
if [[ -z ${BACKEND:-} && -f $DATA/BACKEND ]]; then
	BACKEND=$(cat "$DATA/BACKEND")
fi
BACKEND=${BACKEND:-hashicorp}
if [[ -z ${LOG_STORE:-} && -f $DATA/LOG_STORE ]]; then
	LOG_STORE=$(cat "$DATA/LOG_STORE")
fi
LOG_STORE=${LOG_STORE:-}
TICKETD=${TICKETD:-bin/ticketd}
TICKETCTL=${TICKETCTL:-bin/ticketctl}
SECURE=${SECURE:-}
# A secure cluster stays secure: a plain run of its data must not restart it
# with plaintext clients and authorization off.
if [[ -z $SECURE && -f $DATA/SECURE ]]; then
	SECURE=1
fi
CERTS=$DATA/certs
# The default API addresses are ticketctl's default --endpoints.
DEFAULT_API_ADDRS=127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003
IFS=, read -r -a API <<<"${API_ADDRS:-$DEFAULT_API_ADDRS}"
IFS=, read -r -a RAFT <<<"${RAFT_ADDRS:-127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103}"
if ((${#API[@]} != 3 || ${#RAFT[@]} != 3)); then
	echo "cluster.sh: API_ADDRS and RAFT_ADDRS name three addresses each" >&2
	exit 2
fi

if [[ ! -x $TICKETD ]]; then
	echo "cluster.sh: $TICKETD not found; run 'make build' first" >&2
	exit 1
fi
case $BACKEND in hashicorp | etcd) ;; *)
	echo "cluster.sh: BACKEND must be hashicorp or etcd, not '$BACKEND'" >&2
	exit 1
	;;
esac

mkdir -p "$DATA"
# Data made by one backend cannot be read by the other.
if [[ -f $DATA/BACKEND && $(cat "$DATA/BACKEND") != "$BACKEND" ]]; then
	echo "cluster.sh: $DATA/ holds a cluster made with the $(cat "$DATA/BACKEND") backend; use BACKEND=$(cat "$DATA/BACKEND"), or 'make clean' to start over with $BACKEND" >&2
	exit 1
fi
echo "$BACKEND" >"$DATA/BACKEND"
case $LOG_STORE in "" | badger | wal) ;; *)
	echo "cluster.sh: LOG_STORE must be badger or wal, not '$LOG_STORE'" >&2
	exit 1
	;;
esac
# Each node's data dir records its log store and refuses another; a
# recorded LOG_STORE is passed again on the next run.
if [[ -f $DATA/LOG_STORE && $(cat "$DATA/LOG_STORE") != "$LOG_STORE" ]]; then
	echo "cluster.sh: $DATA/ holds a cluster made with the $(cat "$DATA/LOG_STORE") log store; use LOG_STORE=$(cat "$DATA/LOG_STORE"), or 'make clean' to start over with ${LOG_STORE:-the default}" >&2
	exit 1
fi
if [[ -n $LOG_STORE ]]; then
	echo "$LOG_STORE" >"$DATA/LOG_STORE"
fi
log_store_flags=()
if [[ -n $LOG_STORE ]]; then log_store_flags=(--raft-log-store "$LOG_STORE"); fi

CMD=${1:-run}
case $CMD in
run | restart) ;;
*)
	echo "cluster.sh: unknown command '$CMD' (want: run, or restart nX)" >&2
	exit 2
	;;
esac

port_busy() { (echo >"/dev/tcp/${1%:*}/${1#*:}") 2>/dev/null; }
for addr in "${API[@]}" "${RAFT[@]}"; do
	[[ $CMD == restart ]] && break
	if port_busy "$addr"; then
		echo "cluster.sh: $addr is already in use (another cluster running?)" >&2
		exit 1
	fi
done

# Peers: one CA and a certificate per node (CN = its id, for 127.0.0.1 and
# localhost), made once; a data dir of an older plaintext run gets them on
# its next start and its peers switch to mutual TLS. SECURE=1 adds a client
# certificate for ticketctl and curl.
if [[ ! -x $TICKETCTL ]]; then
	echo "cluster.sh: $TICKETCTL not found; run 'make build' first" >&2
	exit 1
fi
if [[ ! -f $CERTS/ca.crt ]]; then
	"$TICKETCTL" cert create-ca --certs-dir "$CERTS" >/dev/null
fi
for id in "${IDS[@]}"; do
	[[ -f $CERTS/node-$id.crt ]] || "$TICKETCTL" cert create-node --certs-dir "$CERTS" --id "$id" --hosts 127.0.0.1,localhost >/dev/null
done
tls_flags=()
scheme=http
curl_tls=()
if [[ -n $SECURE ]]; then
	[[ -f $CERTS/client.root.crt ]] || "$TICKETCTL" cert create-client --certs-dir "$CERTS" --name root >/dev/null
	# Authorization: root is admin; orders-svc, by bearer token,
	# may lock under orders/; every authenticated principal may read it.
	if [[ ! -f $CERTS/policy.yaml ]]; then
		cat >"$CERTS/policy.yaml" <<'POLICY'
rules:
  - principal: root
    allow: [admin]
  - principal: orders-svc
    prefix: "orders/"
    allow: [lock]
  - principal: "*"
    prefix: "orders/"
    allow: [read]
POLICY
	fi
	if [[ ! -f $CERTS/tokens.yaml ]]; then
		(
			umask 077
			"$TICKETCTL" auth hash-token --new --principal orders-svc >"$CERTS/tokens.new"
			sed -n 's/^# token (give it to orders-svc; it is not stored): //p' "$CERTS/tokens.new" >"$CERTS/orders-svc.token"
			{ echo "tokens:"; grep -v '^#' "$CERTS/tokens.new"; } >"$CERTS/tokens.yaml"
			rm -f "$CERTS/tokens.new"
		)
	fi
	scheme=https
	curl_tls=(--cacert "$CERTS/ca.crt" --cert "$CERTS/client.root.crt" --key "$CERTS/client.root.key")
fi
# SECURE=1 also serves the probes and /metrics on 9101-9103 without a client
# certificate (--listen-metrics-addr), and keeps the policy and tokens files
# unwritable by others whatever the umask (ticketd refuses them otherwise).
IFS=, read -r -a METRICS <<<"${METRICS_ADDRS:-127.0.0.1:9101,127.0.0.1:9102,127.0.0.1:9103}"
if ((${#METRICS[@]} != 3)); then
	echo "cluster.sh: METRICS_ADDRS names three addresses" >&2
	exit 2
fi
if [[ -n $SECURE ]]; then chmod go-w "$CERTS/policy.yaml" "$CERTS/tokens.yaml"; fi
node_tls() {
	local id=$1
	tls_flags=(--peer-cert-file "$CERTS/node-$id.crt" --peer-key-file "$CERTS/node-$id.key"
		--peer-trusted-ca-file "$CERTS/ca.crt")
	[[ -n $SECURE ]] || return 0
	tls_flags+=(--cert-file "$CERTS/node-$id.crt" --key-file "$CERTS/node-$id.key"
		--trusted-ca-file "$CERTS/ca.crt" --client-cert-auth
		--auth-policy-file "$CERTS/policy.yaml" --auth-tokens-file "$CERTS/tokens.yaml"
		--listen-metrics-addr "${METRICS[${id#n}-1]}")
}

peers=""
for i in 0 1 2; do
	peers+="${peers:+,}${IDS[i]}=${RAFT[i]}/${API[i]}"
done

# node_cmd i: the exact `ticketd serve` command of node i, one word per line.
# The three nodes' own origins may call each other (CORS), so the web console
# served by any node can show every member's status.
node_cmd() {
	local i=$1 id=${IDS[$1]} origins=() a
	node_tls "$id"
	for a in "${API[@]}"; do origins+=("$scheme://$a"); done
	printf '%s\n' "$TICKETD" serve --id "$id" --api-addr "${API[i]}" --raft-addr "${RAFT[i]}" \
		--data-dir "$DATA/$id" --backend "$BACKEND" ${log_store_flags[@]+"${log_store_flags[@]}"} --bootstrap "$peers" \
		--cors-allowed-origins "$(IFS=,; echo "${origins[*]}")" \
		--log-format console ${tls_flags[@]+"${tls_flags[@]}"}
}

# start_node i: start node i in the background, appending to its log, and
# record its pid in $DATA/nX.pid.
start_node() {
	local i=$1 cmd
	mapfile -t cmd < <(node_cmd "$i")
	"${cmd[@]}" >>"$DATA/${IDS[i]}.log" 2>&1 &
	echo $! >"$DATA/${IDS[i]}.pid"
}

# pid_of i: sets NODE_PID to the pid in node i's pid file (empty without
# one). A builtin read, not $(cat ...): the supervisor runs no child process
# of its own while it waits (see stop_nodes).
pid_of() {
	NODE_PID=
	{ read -r NODE_PID <"$DATA/${IDS[$1]}.pid"; } 2>/dev/null || true
}
# status addr: the node's ClusterService/Status answer (Connect JSON), or
# nothing while it does not answer.
status() { curl -s -m 1 ${curl_tls[@]+"${curl_tls[@]}"} -H 'Content-Type: application/json' -d '{}' "$scheme://$1/ticket.v1.ClusterService/Status" 2>/dev/null || true; }
alive() { [[ -n $1 ]] && kill -0 "$1" 2>/dev/null; }

# term_nodes i...: SIGTERM each node i whose pid file still names ticketd
# serving its data dir (node-pid.sh), never a process this script did not
# start, and set STOPPING to those nodes. SIGTERM is the clean shutdown: a
# leader hands leadership over first (docs/operations.md#rolling-restart).
term_nodes() {
	local i
	STOPPING=()
	for i in "$@"; do
		pid_of "$i"
		if is_node_pid "$DATA" "${IDS[i]}" "$NODE_PID"; then
			kill -TERM "$NODE_PID" 2>/dev/null || true
			STOPPING+=("$i")
		fi
	done
}

# await_stop: wait up to STOP_TIMEOUT seconds for the nodes term_nodes
# signalled to exit, then SIGKILL those still up (a hung or SIGSTOPped
# process never ends by itself) and say so. A node that this shell started
# is reaped with wait at once after its SIGKILL, with no other command in
# between: bash reports a child killed by a signal ("Killed") after the next
# command it waits for, unless wait has collected it first.
await_stop() {
	local i deadline left=() killed=()
	deadline=$((SECONDS + STOP_TIMEOUT))
	for i in ${STOPPING[@]+"${STOPPING[@]}"}; do
		pid_of "$i"
		while alive "$NODE_PID" && ((SECONDS < deadline)); do sleep 0.1; done
		if alive "$NODE_PID"; then left+=("$i"); fi
	done
	# Identity checks (ps) first, then every SIGKILL and wait.
	for i in ${left[@]+"${left[@]}"}; do
		pid_of "$i"
		if is_node_pid "$DATA" "${IDS[i]}" "$NODE_PID"; then killed+=("$i"); fi
	done
	for i in ${killed[@]+"${killed[@]}"}; do
		pid_of "$i"
		kill -KILL "$NODE_PID" 2>/dev/null || true
	done
	for i in ${killed[@]+"${killed[@]}"}; do
		pid_of "$i"
		wait "$NODE_PID" 2>/dev/null || true
	done
	# A node restarted by `make node` is another shell's child: SIGKILL
	# ends it at once, its parent (init) reaps it.
	for i in ${killed[@]+"${killed[@]}"}; do
		pid_of "$i"
		for _ in $(seq 1 100); do alive "$NODE_PID" || break; sleep 0.1; done
		say "${IDS[i]} (pid $NODE_PID) did not stop within ${STOP_TIMEOUT}s of SIGTERM: stopped with SIGKILL (STOP_TIMEOUT=$STOP_TIMEOUT)"
	done
}

# say prints a line of the supervisor's; a stdout that went away (the
# `| tee` of `make run 2>&1 | tee run.log` ended by the same Ctrl-C) must
# not end the script under set -e before it stops its nodes.
# SIGPIPE is ignored once the nodes are started (they do not inherit it).
say() { printf '%s\n' "$*" 2>/dev/null || true; }

# readyz i: sets READY_CODE and READY_BODY to node i's GET /readyz answer
# (docs/operations.md#health-and-monitoring): on the API port, or with
# SECURE on its plaintext probe address (the API port wants a client
# certificate). READY_CODE is 000 while the node does not answer.
readyz() {
	local url=http://${API[$1]}/readyz out
	if [[ -n $SECURE ]]; then url=http://${METRICS[$1]}/readyz; fi
	out=$(curl -s -m 2 -w '\n%{http_code}' "$url" 2>/dev/null || true)
	READY_CODE=${out##*$'\n'}
	READY_BODY=${out%$'\n'*}
	[[ $out == *$'\n'* ]] || READY_BODY=
	READY_BODY=${READY_BODY%$'\n'}
	READY_CODE=${READY_CODE:-000}
}

# restart nX: stop the node (SIGTERM, SIGKILL after STOP_TIMEOUT), start it
# again with the same command, and wait until it is ready.
if [[ $CMD == restart ]]; then
	want=${2:-}
	idx=-1
	for i in 0 1 2; do [[ ${IDS[i]} == "$want" ]] && idx=$i; done
	if ((idx < 0)); then
		echo "cluster.sh restart: want a node id: ${IDS[*]} (got '${want}')" >&2
		exit 2
	fi
	term_nodes "$idx"
	await_stop
	if port_busy "${API[idx]}"; then
		echo "cluster.sh restart: ${API[idx]} is still in use (started by hand?); stop that process first" >&2
		exit 1
	fi
	start_node "$idx"
	# Wait until the node answers /readyz 200 (a leader known, its log
	# replayed and applied), as a rolling restart does before the next node
	# (docs/operations.md#rolling-restart). A node that refuses to start (a
	# missing watermark, a damaged log, a bad flag: docs/operations.md)
	# or is not ready within READY_TIMEOUT seconds is reported with the
	# tail of its log and exit status 1; a node not yet ready keeps running.
	pid_of "$idx"
	pid=$NODE_PID
	deadline=$((SECONDS + READY_TIMEOUT))
	while :; do
		if ! alive "$pid"; then
			rc=0
			wait "$pid" 2>/dev/null || rc=$?
			echo "cluster.sh restart: $want (pid $pid) exited at start with status $rc; the end of $DATA/$want.log:" >&2
			tail -n 20 "$DATA/$want.log" >&2 || true
			exit 1
		fi
		readyz "$idx"
		[[ $READY_CODE == 200 ]] && break
		if ((SECONDS >= deadline)); then
			echo "cluster.sh restart: $want (pid $pid) is not ready after ${READY_TIMEOUT}s (READY_TIMEOUT): /readyz answers $READY_CODE ${READY_BODY:-(no answer)}; it keeps running; the end of $DATA/$want.log:" >&2
			tail -n 20 "$DATA/$want.log" >&2 || true
			exit 1
		fi
		sleep 0.2
	done
	echo "restarted $want (pid $pid), ready; log in $DATA/$want.log"
	exit 0
fi

if [[ -n $SECURE ]]; then touch "$DATA/SECURE"; fi

# stop_all stops every node started or restarted through this script (its
# pid file; `make node` restarts a node in another process group, which a
# Ctrl-C does not reach): SIGTERM to all before it prints anything, then
# SIGKILL to those still up after STOP_TIMEOUT (await_stop).
stop_all() {
	trap - INT TERM
	term_nodes 0 1 2
	say
	say "stopping ticketd nodes..."
	await_stop
	wait || true
	say "stopped (data kept in $DATA/)"
	exit 0
}
trap stop_all INT TERM

pids=()
for i in 0 1 2; do
	start_node "$i"
	pid_of "$i"
	pids+=("$NODE_PID")
done
trap '' PIPE

leader=""
for _ in $(seq 1 100); do
	leader=$(status "${API[0]}" | sed -n 's/.*"leaderId":"\([^"]*\)".*/\1/p')
	[[ -n $leader ]] && break
	for p in "${pids[@]}"; do
		if ! kill -0 "$p" 2>/dev/null; then
			echo "cluster.sh: a node exited at start; see $DATA/*.log" >&2
			tail -n 5 "$DATA"/n?.log >&2
			stop_all
		fi
	done
	sleep 0.1
done

cat <<INFO

ticketd: three nodes, backend $BACKEND, data under $DATA/ (leader: ${leader:-electing})
INFO
# A second run starts from the data the first left: say so, and how to
# start clean (scripts/clean.sh removes the data root and bin/).
# The make commands it prints (make node, make clean, make run) carry the
# settings this run was given, so they act on this cluster, not the
# default one.
# shell_word prints $1 as one shell word: as it is when it holds only
# characters no shell treats specially, else quoted by printf %q.
shell_word() {
	if [[ $1 =~ ^[A-Za-z0-9_./:=,@%+-]+$ ]]; then printf '%s' "$1"; else printf '%q' "$1"; fi
}
make_vars=""
if [[ $DATA != data ]]; then make_vars+=" DATA=$(shell_word "$DATA")"; fi
for v in API_ADDRS RAFT_ADDRS METRICS_ADDRS; do
	if [[ -n ${!v:-} ]]; then make_vars+=" $v=$(shell_word "${!v}")"; fi
done
if ((${#reused[@]} > 0)); then
	cat <<INFO

Reusing the data of an earlier run in $(cd "$DATA" && pwd)/ (nodes ${reused[*]}):
the locks, fencing tokens, sessions and members are those it left. To start
clean: Ctrl-C, then 'make clean$make_vars' (deletes $DATA/ and bin/), then 'make run$make_vars'.
INFO
fi
cat <<INFO

  node  pid      client API        peer (Raft)       log
INFO
for i in 0 1 2; do
	printf '  %-4s  %-7s  %-16s  %-16s  %s\n' "${IDS[i]}" "${pids[i]}" "${API[i]}" "${RAFT[i]}" "$DATA/${IDS[i]}.log"
done
echo
echo "Restart one node: make node N=n3$make_vars   (or scripts/cluster.sh restart n3); by hand:"
for i in 0 1 2; do
	mapfile -t cmd < <(node_cmd "$i")
	printf '  %s:' "${IDS[i]}"
	for w in "${cmd[@]}"; do
		printf ' %s' "$(shell_word "$w")"
	done
	printf ' >>%q 2>&1 &\n' "$DATA/${IDS[i]}.log"
done
# The "Try" lines below name the nodes for ticketctl when they are not its
# default endpoints (TICKETD_ENDPOINTS, read by every ticketctl command).
api_list=$(IFS=,; echo "${API[*]}")
endpoints_line=""
if [[ $api_list != "$DEFAULT_API_ADDRS" ]]; then
	endpoints_line="  export TICKETD_ENDPOINTS=$api_list"$'\n'
fi
if [[ -n $SECURE ]]; then
	cat <<INFO

Secure mode: client TLS with client-certificate auth and peer mutual TLS; CA
and certificates in $CERTS/ (made by ticketctl cert). Plaintext is refused.
Remembered in $DATA/SECURE: later runs stay secure until 'make clean'.
Authorization is on: $CERTS/policy.yaml makes the client certificate "root"
admin; the bearer token in $CERTS/orders-svc.token locks under orders/ (edit
the policy, then kill -HUP the nodes to reload it).

Try, from another terminal:
${endpoints_line}  export TICKETD_CACERT=$CERTS/ca.crt TICKETD_CLIENT_CERT=$CERTS/client.root.crt TICKETD_CLIENT_KEY=$CERTS/client.root.key
  bin/ticketctl status
  bin/ticketctl lock acquire orders/42 --ttl 60s
  bin/ticketctl lock list
  bin/ticketctl lock release orders/42 --force          # admin only; audited
  TICKETD_TOKEN=\$(cat $CERTS/orders-svc.token) bin/ticketctl lock acquire orders/7 --ttl 60s
  curl -s --cacert $CERTS/ca.crt --cert $CERTS/client.root.crt --key $CERTS/client.root.key \\
      -H 'Content-Type: application/json' -d '{"key":"orders/43","leaseMs":"60000"}' \\
      https://${API[0]}/ticket.v1.LockService/Acquire

Probes and metrics need no client certificate on ${METRICS[*]}:
  curl -s http://${METRICS[0]}/readyz; curl -s http://${METRICS[0]}/metrics | head

Failover: kill -9 the leader's pid; the other two elect a new leader and keep
serving (locks keep their tokens). Ctrl-C stops all three.
INFO
else
	cat <<INFO

Peers speak mutual TLS (one certificate per node in $CERTS/); the client API
is plaintext on loopback.

Try, from another terminal:
${endpoints_line}  bin/ticketctl status
  bin/ticketctl lock acquire orders/42 --ttl 60s
  bin/ticketctl lock list
  curl -s -H 'Content-Type: application/json' -d '{"key":"orders/43","leaseMs":"60000"}' \\
      http://${API[0]}/ticket.v1.LockService/Acquire
  go tool buf curl --protocol grpc --http2-prior-knowledge --reflect -d '{}' \\
      http://${API[0]}/ticket.v1.ClusterService/Status

Web console (every node serves one): http://${API[0]}/ui/

Failover: kill -9 the leader's pid; the other two elect a new leader and keep
serving (locks keep their tokens). Ctrl-C stops all three.
INFO
fi

# Supervise: report nodes that exit (kill -9 by hand) or are restarted
# (make node N=nX), and keep running while any node is up: one started or
# restarted through this script (pid file), or one started by hand (its API
# port is taken). It waits with `wait -n` on a one-second sleep: a node of
# its own killed by a signal (kill -9) is reaped there, so that bash prints
# no "Killed" job line for it, and a Ctrl-C is handled at once.
declare -A seen
for i in 0 1 2; do seen[$i]=${pids[i]}; done
while :; do
	up=0
	for i in 0 1 2; do
		pid_of "$i"
		p=$NODE_PID
		if [[ $p != "${seen[$i]}" ]]; then
			seen[$i]=$p
			say "node ${IDS[i]} restarted (pid $p)"
		fi
		if alive "$p"; then
			up=$((up + 1))
		elif [[ -z ${reported[i]:-} || ${reported[i]} != "$p" ]]; then
			if port_busy "${API[i]}"; then
				up=$((up + 1))
				continue
			fi
			reported[i]=$p
			say "node ${IDS[i]} (pid $p) exited; see $DATA/${IDS[i]}.log; restart: make node N=${IDS[i]}$make_vars"
		elif port_busy "${API[i]}"; then
			up=$((up + 1))
		fi
	done
	((up > 0)) || break
	sleep 1 &
	wait -n 2>/dev/null || true
done
wait || true
say "all nodes exited"
