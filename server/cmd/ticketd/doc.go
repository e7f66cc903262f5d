// Command ticketd runs one node of a ticketd cluster: the replicated lock
// service with fencing tokens (see docs/operations.md).
//
//	ticketd serve --id n1 --api-addr 127.0.0.1:7001 --raft-addr 127.0.0.1:7101 \
//	    --data-dir data/n1 --bootstrap n1=127.0.0.1:7101/127.0.0.1:7001,...
//	ticketd serve --config ticketd.yaml
//	ticketd version
package main
