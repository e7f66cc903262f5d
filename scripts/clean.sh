#!/usr/bin/env bash
# clean.sh — what `make clean` runs: remove $BIN and $DATA, unless a node
# that `make run` (scripts/cluster.sh) started on $DATA is still running.
# Removing a live node's data dir under it leaves the node looping on
# storage errors; stop the cluster first (Ctrl-C in make run's terminal).
#
#   DATA=./data  the data root cluster.sh used (pid files $DATA/nX.pid)
#   BIN=./bin    the build output
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${DATA:-data}
BIN=${BIN:-bin}
# shellcheck source=node-pid.sh
. scripts/node-pid.sh

live=()
for f in "$DATA"/n*.pid; do
	[[ -f $f ]] || continue
	pid=$(cat "$f" 2>/dev/null || true)
	[[ $pid =~ ^[0-9]+$ ]] || continue
	id=$(basename "$f" .pid)
	# It counts only while it is still that node (node-pid.sh).
	if is_node_pid "$DATA" "$id" "$pid"; then
		live+=("$id (pid $pid)")
	fi
done
if ((${#live[@]} > 0)); then
	echo "make clean: refusing: ticketd nodes of 'make run' are running on $DATA/: ${live[*]}; stop them first (Ctrl-C where make run runs, or kill -TERM the pids)" >&2
	exit 1
fi
rm -rf "$BIN" "$DATA"
