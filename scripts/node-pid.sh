# node-pid.sh — sourced by cluster.sh and clean.sh: whether a pid read from
# a pid file $DATA/nX.pid is still that node.
#
# A pid file outlives its node, and its pid may since belong to another
# process: such a process must never be signalled (cluster.sh) or counted as
# a live node (clean.sh).

# is_node_pid data id pid: true while pid is a ticketd serving the data dir
# data/id (cluster.sh's node_cmd passes --data-dir $DATA/nX). A zombie's
# args are "[ticketd] <defunct>": it no longer counts.
is_node_pid() {
	local data=$1 id=$2 pid=$3 args
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	args=$(ps -o args= -p "$pid" 2>/dev/null) || return 1
	[[ $args == *ticketd*serve*"--data-dir $data/$id "* || $args == *ticketd*serve*"--data-dir $data/$id" ]]
}
