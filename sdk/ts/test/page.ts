// The test page of test/browser.test.mjs, served from another origin than
// the cluster's: it exposes the package to the test through window.
import { createClient } from "../src/index.js";
import type { Client, Lease } from "../src/index.js";
import { webTransport } from "../src/web.js";

const clients = new Map<string, Client>();
const leases = new Map<string, Lease>();

(globalThis as unknown as { ticketdTest: unknown }).ticketdTest = {
  /** lock takes key over protocol ("connect" or "grpc-web") and returns the token as a string. */
  async lock(endpoints: string[], protocol: "connect" | "grpc-web", key: string, ttlMs: number): Promise<string> {
    let c = clients.get(protocol);
    if (c === undefined) {
      c = createClient({ endpoints, transport: webTransport({ protocol }) });
      clients.set(protocol, c);
    }
    const l = await c.tryLock(key, { ttlMs });
    leases.set(key, l);
    const info = await c.getLock(key);
    if (info.token !== l.token) throw new Error(`getLock: token ${info.token}, want ${l.token}`);
    return String(l.token);
  },
  /** release releases key's lease and returns its signal's abort reason's name. */
  async release(key: string): Promise<string> {
    const l = leases.get(key)!;
    await l.release();
    return (l.signal.reason as Error).name;
  },
};
document.title = "ready";
