// Nodes below the client for unit tests: a TransportFactory whose node at
// each host:port serves the handlers a test gives it (parts of LockService
// and ClusterService; the rest answer Unimplemented) over an in-memory
// transport (connect-es createRouterTransport: the Connect protocol's
// encoding and error details, no network, no timers).
import { createRouterTransport } from "@connectrpc/connect";
import { ClusterService } from "../dist/gen/ticket/v1/cluster_pb.js";
import { LockService } from "../dist/gen/ticket/v1/lock_pb.js";

/**
 * fakeNodes returns { factory, calls, urls }: factory for createClient or
 * new Client, calls recording every request as "host:port method" in the
 * order the nodes got them, urls every base URL the client made a
 * transport for. nodes maps host:port to { lock, cluster } handlers.
 */
export function fakeNodes(nodes) {
  const calls = [];
  const urls = [];
  const factory = (baseUrl) => {
    urls.push(baseUrl);
    const host = baseUrl.replace(/^https?:\/\//, "");
    const n = nodes[host] ?? {};
    return createRouterTransport((router) => {
      router.service(LockService, recorded(host, n.lock ?? {}, calls));
      router.service(ClusterService, recorded(host, n.cluster ?? {}, calls));
    });
  };
  return { factory, calls, urls };
}

function recorded(host, impl, calls) {
  const out = {};
  for (const [name, fn] of Object.entries(impl)) {
    out[name] = (req, ctx) => {
      calls.push(`${host} ${name}`);
      return fn(req, ctx);
    };
  }
  return out;
}

/** statusOf is a node's Status answer: itself, the leader it names ("" for none) and the members' API addresses. */
export function statusOf(self, leader, members) {
  return {
    nodeId: self,
    leaderId: leader,
    leaderAddr: leader,
    members: members.map((m) => ({ id: m, apiAddr: m, voter: true })),
  };
}
