// Transports for browsers (connect-web, fetch): the Connect protocol or
// gRPC-Web. Browsers can make unary and server-streaming calls only, which
// is all the lock API needs (Renew is unary, Watch a server stream). A page
// on another origin needs the node started with --cors-allowed-origins.
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";
import type { TransportFactory } from "./transport.js";

/** Options of webTransport. */
export interface WebTransportOptions {
  /** "connect" (default) or "grpc-web". */
  protocol?: "connect" | "grpc-web";
  /** Send binary protobuf rather than JSON (default true). */
  binary?: boolean;
}

/** webTransport returns a TransportFactory for browsers (fetch). */
export function webTransport(opts: WebTransportOptions = {}): TransportFactory {
  return (baseUrl: string) => {
    if (opts.protocol === "grpc-web") {
      return createGrpcWebTransport({ baseUrl, useBinaryFormat: opts.binary ?? true });
    }
    return createConnectTransport({ baseUrl, useBinaryFormat: opts.binary ?? true });
  };
}
