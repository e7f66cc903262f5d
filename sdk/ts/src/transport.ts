// The seam between the client and a connect-es transport. The client makes
// one transport per node base URL through a TransportFactory, so the same
// client code runs over connect-node (Node: Connect or gRPC, src/node.ts) and
// connect-web (browsers: Connect or gRPC-Web, src/web.ts).
import type { Transport } from "@connectrpc/connect";

/**
 * TransportFactory makes the transport for one node, given its base URL
 * ("http://127.0.0.1:7001"). It is called once per node the client talks
 * to. close, when present, is called by Client.close() to drop the
 * connections the factory opened (Node's HTTP/2 sessions).
 */
export interface TransportFactory {
  (baseUrl: string): Transport;
  close?: () => void;
}
