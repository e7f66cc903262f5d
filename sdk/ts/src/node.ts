// Transports for Node (connect-node): the Connect protocol or gRPC, over
// HTTP/2 (h2c with prior knowledge for http:// URLs, as ticketd serves).
import { Http2SessionManager, createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { defaults } from "./defaults.js";
import type { TransportFactory } from "./transport.js";

/** Options of nodeTransport. */
export interface NodeTransportOptions {
  /** "connect" (default) or "grpc". */
  protocol?: "connect" | "grpc";
  /** Send binary protobuf (default true) rather than JSON (Connect only). */
  binary?: boolean;
  /**
   * PING an HTTP/2 connection after this many milliseconds of silence and
   * drop it when the PING is not answered within as long, so calls to a
   * stopped node fail instead of hanging (default 2000, as the Go SDK's
   * DefaultKeepAlive).
   */
  keepAliveMs?: number;
}

/**
 * nodeTransport returns a TransportFactory for Node. Each node gets one
 * HTTP/2 session manager; the factory's close() (called by Client.close())
 * closes them, so a Node process can exit.
 */
export function nodeTransport(opts: NodeTransportOptions = {}): TransportFactory {
  const managers: Http2SessionManager[] = [];
  const keepAliveMs = opts.keepAliveMs ?? defaults.keepAliveMs;
  const factory: TransportFactory = (baseUrl: string) => {
    const sessionManager = new Http2SessionManager(baseUrl, {
      pingIntervalMs: keepAliveMs,
      pingTimeoutMs: keepAliveMs,
      idleConnectionTimeoutMs: 60_000,
    });
    managers.push(sessionManager);
    if (opts.protocol === "grpc") {
      return createGrpcTransport({ baseUrl, sessionManager });
    }
    return createConnectTransport({ baseUrl, httpVersion: "2", sessionManager, useBinaryFormat: opts.binary ?? true });
  };
  factory.close = () => {
    for (const m of managers.splice(0)) m.abort();
  };
  return factory;
}
