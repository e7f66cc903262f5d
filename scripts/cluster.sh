#!/usr/bin/env bash
# cluster.sh — start a local three-node ticketd cluster (what `make run` runs).
#
#   BACKEND=hashicorp|etcd  consensus backend (default: the one $DATA was made
#                           with, else hashicorp)
#   DATA=./data             data root: node data in $DATA/nX, logs in $DATA/nX.log
#   TICKETD=bin/ticketd     the ticketd binary
#   SECURE=1                client TLS, client-certificate auth and peer mutual
#                           TLS, with a CA and certificates that
#                           `ticketctl cert` makes once under $DATA/certs/
#   TICKETCTL=bin/ticketctl the ticketctl binary (SECURE=1 makes certificates with it)
#
# Nodes n1..n3 serve the client API on 127.0.0.1:7001-7003 and peer (Raft)
# traffic on 127.0.0.1:7101-7103. A second run reuses the data (the bootstrap
# list only applies to empty data dirs). kill -9 of one node leaves the other
# two serving; Ctrl-C stops them all.
set -euo pipefail
cd "$(dirname "$0")/.."

DATA=${DATA:-data}
if [[ -z ${BACKEND:-} && -f $DATA/BACKEND ]]; then
	BACKEND=$(cat "$DATA/BACKEND")
fi
BACKEND=${BACKEND:-hashicorp}
TICKETD=${TICKETD:-bin/ticketd}
TICKETCTL=${TICKETCTL:-bin/ticketctl}
SECURE=${SECURE:-}
CERTS=$DATA/certs
IDS=(n1 n2 n3)
API=(127.0.0.1:7001 127.0.0.1:7002 127.0.0.1:7003)
RAFT=(127.0.0.1:7101 127.0.0.1:7102 127.0.0.1:7103)

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

port_busy() { (echo >"/dev/tcp/${1%:*}/${1#*:}") 2>/dev/null; }
for addr in "${API[@]}" "${RAFT[@]}"; do
	if port_busy "$addr"; then
		echo "cluster.sh: $addr is already in use (another cluster running?)" >&2
		exit 1
	fi
done

# SECURE=1: one CA for clients and peers, a certificate per node for
# 127.0.0.1 and localhost, and a client certificate for ticketctl and curl.
tls_flags=()
scheme=http
curl_tls=()
if [[ -n $SECURE ]]; then
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
	[[ -f $CERTS/client.root.crt ]] || "$TICKETCTL" cert create-client --certs-dir "$CERTS" --name root >/dev/null
	scheme=https
	curl_tls=(--cacert "$CERTS/ca.crt" --cert "$CERTS/client.root.crt" --key "$CERTS/client.root.key")
fi
node_tls() {
	[[ -n $SECURE ]] || return 0
	local id=$1
	tls_flags=(--cert-file "$CERTS/node-$id.crt" --key-file "$CERTS/node-$id.key"
		--trusted-ca-file "$CERTS/ca.crt" --client-cert-auth
		--peer-cert-file "$CERTS/node-$id.crt" --peer-key-file "$CERTS/node-$id.key"
		--peer-trusted-ca-file "$CERTS/ca.crt")
}

peers=""
for i in 0 1 2; do
	peers+="${peers:+,}${IDS[i]}=${RAFT[i]}/${API[i]}"
done

pids=()
stop_all() {
	trap - INT TERM
	echo
	echo "stopping ticketd nodes..."
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	wait || true
	echo "stopped (data kept in $DATA/)"
	exit 0
}
trap stop_all INT TERM

for i in 0 1 2; do
	id=${IDS[i]}
	node_tls "$id"
	"$TICKETD" serve --id "$id" --api-addr "${API[i]}" --raft-addr "${RAFT[i]}" \
		--data-dir "$DATA/$id" --backend "$BACKEND" --bootstrap "$peers" \
		--log-format console ${tls_flags[@]+"${tls_flags[@]}"} >>"$DATA/$id.log" 2>&1 &
	pids+=($!)
done

status() { curl -s -m 1 ${curl_tls[@]+"${curl_tls[@]}"} -H 'Content-Type: application/json' -d '{}' "$scheme://$1/ticket.v1.ClusterService/Status" 2>/dev/null || true; }
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

  node  pid      client API        peer (Raft)       log
INFO
for i in 0 1 2; do
	printf '  %-4s  %-7s  %-16s  %-16s  %s\n' "${IDS[i]}" "${pids[i]}" "${API[i]}" "${RAFT[i]}" "$DATA/${IDS[i]}.log"
done
if [[ -n $SECURE ]]; then
	cat <<INFO

Secure mode: client TLS with client-certificate auth and peer mutual TLS; CA
and certificates in $CERTS/ (made by ticketctl cert). Plaintext is refused.

Try, from another terminal:
  export TICKETD_CACERT=$CERTS/ca.crt TICKETD_CERT=$CERTS/client.root.crt TICKETD_KEY=$CERTS/client.root.key
  bin/ticketctl status
  bin/ticketctl lock acquire orders/42 --ttl 10s
  bin/ticketctl lock list
  curl -s --cacert $CERTS/ca.crt --cert $CERTS/client.root.crt --key $CERTS/client.root.key \\
      -H 'Content-Type: application/json' -d '{"key":"orders/42","leaseMs":"10000"}' \\
      https://${API[0]}/ticket.v1.LockService/Acquire

Failover: kill -9 the leader's pid; the other two elect a new leader and keep
serving (locks keep their tokens). Ctrl-C stops all three.
INFO
else
	cat <<INFO

Try, from another terminal:
  bin/ticketctl status
  bin/ticketctl lock acquire orders/42 --ttl 10s
  bin/ticketctl lock list
  curl -s -H 'Content-Type: application/json' -d '{"key":"orders/42","leaseMs":"10000"}' \\
      http://${API[0]}/ticket.v1.LockService/Acquire
  go tool buf curl --protocol grpc --http2-prior-knowledge --reflect -d '{}' \\
      http://${API[0]}/ticket.v1.ClusterService/Status

Failover: kill -9 the leader's pid; the other two elect a new leader and keep
serving (locks keep their tokens). Ctrl-C stops all three.
INFO
fi

# Report nodes that exit (kill -9 by hand) and keep serving with the rest.
alive=3
while ((alive > 0)); do
	wait -n || true
	alive=0
	for i in 0 1 2; do
		if kill -0 "${pids[i]}" 2>/dev/null; then
			alive=$((alive + 1))
		elif [[ -z ${reported[i]:-} ]]; then
			reported[i]=1
			echo "node ${IDS[i]} (pid ${pids[i]}) exited; see $DATA/${IDS[i]}.log"
		fi
	done
done
echo "all nodes exited"
