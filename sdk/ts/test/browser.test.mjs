// Headless Chromium (Debian's chromium, driven by playwright-core) against
// a real three-node cluster: the web console from one node, and a page on
// another origin that uses the package over Connect and over gRPC-Web
// (CORS). Screenshots go to test-artifacts/. CHROMIUM overrides the
// browser's path.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";
import { build } from "esbuild";
import { chromium } from "playwright-core";
import { createClient, Mode } from "../dist/index.js";
import { nodeTransport } from "../dist/node.js";
import { authArgs, tokens } from "./auth.mjs";
import { freePorts, startCluster } from "./cluster.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const artifacts = path.resolve(here, "../test-artifacts");
const executablePath = process.env.CHROMIUM ?? "/usr/bin/chromium";

/** servePage serves the test page and its bundled script on 127.0.0.1:port. */
async function servePage(port) {
  const res = await build({
    entryPoints: [path.join(here, "page.ts")], bundle: true, format: "esm", platform: "browser",
    target: "es2022", write: false, outfile: "page.js", logLevel: "error",
  });
  const js = res.outputFiles[0].contents;
  const html = '<!doctype html><meta charset="utf-8"><title>loading</title><script type="module" src="page.js"></script>';
  const srv = http.createServer((req, w) => {
    if (req.url === "/page.js") w.writeHead(200, { "content-type": "text/javascript" }).end(js);
    else w.writeHead(200, { "content-type": "text/html" }).end(html);
  });
  await new Promise((r) => srv.listen(port, "127.0.0.1", r));
  return srv;
}

describe("browser: console and cross-origin page", () => {
  let cluster, pageServer, ctx, profile, pageOrigin;
  const started = performance.now();
  before(async () => {
    mkdirSync(artifacts, { recursive: true });
    const [pagePort] = await freePorts(1);
    pageOrigin = `http://127.0.0.1:${pagePort}`;
    cluster = await startCluster({
      args: (nodes) => ["--cors-allowed-origins", [pageOrigin, ...nodes.map((n) => `http://${n.api}`)].join(",")],
    });
    pageServer = await servePage(pagePort);
    profile = mkdtempSync(path.join(os.tmpdir(), "ticketd-chromium-"));
    ctx = await chromium.launchPersistentContext(profile, {
      executablePath,
      headless: true,
      viewport: { width: 1100, height: 760 },
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    });
  });
  after(async () => {
    await ctx?.close();
    pageServer?.close();
    await cluster?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
    console.log(`browser suite took ${((performance.now() - started) / 1000).toFixed(1)} s`);
  });

  test("console_shows_members", async () => {
    const ui = await ctx.newPage();
    await ui.goto(`http://${cluster.endpoints[0]}/ui/`);
    await ui.waitForFunction(() => document.querySelectorAll("#members tbody tr").length === 3, null, { timeout: 10_000 });
    await ui.waitForSelector("#members .badge.leader", { timeout: 10_000 });
    await ui.waitForFunction(() => [...document.querySelectorAll("#members tbody tr td:nth-child(6)")].every((td) => td.textContent === "serving"), null, { timeout: 10_000 });
    await ui.close();
  });

  for (const protocol of ["connect", "grpc-web"]) {
    test(`cross_origin_${protocol.replace("-", "_")}_acquire_watch_release`, async () => {
      const key = `browser/${protocol}`;
      const ui = await ctx.newPage();
      await ui.goto(`http://${cluster.endpoints[0]}/ui/?prefix=browser/`);
      await ui.waitForSelector("#members .badge.leader", { timeout: 10_000 });
      // The console's watch announced where it went live.
      await ui.waitForSelector("#live[data-started]", { timeout: 10_000 });
      assert.match(await ui.textContent("#live"), /^live after index \d+$/);
      const page = await ctx.newPage();
      const errors = [];
      page.on("pageerror", (e) => errors.push(e));
      await page.goto(pageOrigin + "/");
      await page.waitForFunction(() => document.title === "ready", null, { timeout: 10_000 });
      // The page talks to another node than the one serving the console.
      const endpoints = cluster.endpoints.slice(1).map((a) => `http://${a}`);
      const token = await page.evaluate(([e, p, k]) => globalThis.ticketdTest.lock(e, p, k, 3000), [endpoints, protocol, key]);
      assert.ok(BigInt(token) > 0n);
      const row = `#locks tr[data-key="${key}"]`;
      const t0 = performance.now();
      await ui.waitForSelector(row, { timeout: 5000 });
      const seenMs = performance.now() - t0;
      assert.equal(await ui.textContent(`${row} td.token`), token);
      assert.equal(await ui.textContent(`${row} td.mode`), "exclusive");
      // The remaining-lease bar counts down between renewals (drawn on
      // animation frames, which Chromium pauses in a background tab).
      await ui.bringToFront();
      await ui.waitForFunction((sel) => {
        const s = document.querySelector(`${sel} .bar > span`);
        return s && parseFloat(s.style.width) < 90;
      }, row, { timeout: 5000 });
      await ui.screenshot({ path: path.join(artifacts, `console-held-${protocol}.png`) });
      assert.equal(await page.evaluate((k) => globalThis.ticketdTest.release(k), key), "ReleasedError");
      const t1 = performance.now();
      await ui.waitForSelector(row, { state: "detached", timeout: 5000 });
      await ui.waitForSelector(`#events li[data-type="RELEASED"][data-key="${key}"]`, { timeout: 5000 });
      const releasedMs = performance.now() - t1;
      await ui.screenshot({ path: path.join(artifacts, `console-released-${protocol}.png`) });
      console.log(`${protocol}: grant shown in console after ${seenMs.toFixed(0)} ms, release after ${releasedMs.toFixed(0)} ms`);
      assert.deepEqual(errors, []);
      await page.close();
      await ui.close();
    });
  }

  test("console_releases_a_lock", async () => {
    const page = await ctx.newPage();
    await page.goto(pageOrigin + "/");
    await page.waitForFunction(() => document.title === "ready", null, { timeout: 10_000 });
    const key = "browser/admin";
    await page.evaluate(([e, k]) => globalThis.ticketdTest.lock(e, "connect", k, 3000), [[`http://${cluster.endpoints[2]}`], key]);
    const ui = await ctx.newPage();
    await ui.setViewportSize({ width: 390, height: 844 }); // a phone
    await ui.goto(`http://${cluster.endpoints[1]}/ui/?prefix=browser/`);
    const row = `#locks tr[data-key="${key}"]`;
    await ui.waitForSelector(row, { timeout: 10_000 });
    await ui.screenshot({ path: path.join(artifacts, "console-phone.png"), fullPage: true });
    await ui.click(`${row} button`);
    await ui.waitForSelector(row, { state: "detached", timeout: 5000 });
    await ui.waitForSelector(`#events li[data-type="RELEASED"][data-key="${key}"]`, { timeout: 5000 });
    await page.close();
    await ui.close();
  });

  test("console_shared_semaphore_session_rows", async () => {
    const c = createClient({ endpoints: cluster.endpoints, transport: nodeTransport() });
    const ui = await ctx.newPage();
    try {
      // Two shared holders of one key (renewing themselves: RENEWED events
      // must not disturb their rows), and two slots of a semaphore under a
      // session.
      const a = await c.tryLock("browser/shared", { ttlMs: 3000, shared: true });
      const b = await c.tryLock("browser/shared", { ttlMs: 3000, mode: Mode.SHARED });
      const s = await c.createSession(30_000);
      const x = await c.tryLock("browser/sem", { ttlMs: 0, limit: 3, session: s.id });
      await ui.goto(`http://${cluster.endpoints[0]}/ui/?prefix=browser/`);
      const y = await c.tryLock("browser/sem", { ttlMs: 0, limit: 3, session: s.id }); // seen through Watch
      const shared = '#locks tr[data-key="browser/shared"]';
      const sem = '#locks tr[data-key="browser/sem"]';
      const count = (sel, n) => ui.waitForFunction(([q, want]) => document.querySelectorAll(q).length === want, [sel, n], { timeout: 5000 });
      await count(shared, 2);
      await count(sem, 2);
      const cells = (sel, cls) => ui.$$eval(`${sel} td.${cls}`, (tds) => tds.map((td) => td.textContent));
      assert.deepEqual(await cells(shared, "token"), [String(a.token), String(b.token)]);
      assert.deepEqual(await cells(shared, "mode"), ["shared", "shared"]);
      assert.deepEqual(await cells(shared, "session"), ["", ""]);
      assert.deepEqual(await cells(sem, "token"), [String(x.token), String(y.token)]);
      assert.deepEqual(await cells(sem, "mode"), ["semaphore 3", "semaphore 3"]);
      assert.deepEqual(await cells(sem, "session"), [String(s.id), String(s.id)]);
      await ui.bringToFront();
      await ui.screenshot({ path: path.join(artifacts, "console-shared.png") });
      // Releasing one shared holder leaves the other's row.
      await a.release();
      await count(shared, 1);
      await ui.waitForSelector(`#events li[data-type="RELEASED"][data-key="browser/shared"]`, { timeout: 5000 });
      assert.deepEqual(await cells(shared, "token"), [String(b.token)]);
      // Force release of the semaphore's key ends every holder.
      await ui.fill("#forcekey", "browser/sem");
      await ui.click("#force button");
      await count(sem, 0);
      assert.equal((await c.getLock("browser/sem")).held, false);
      assert.equal(await ui.textContent("#error"), "");
      await b.release();
      await count(shared, 0);
      await s.close();
    } finally {
      await ui.close();
      await c.close();
    }
  });

  test("console_admin_token_force_release", async () => {
    const secure = await startCluster({ args: (_nodes, dir) => authArgs(dir), token: tokens.ops });
    const app = createClient({ endpoints: secure.endpoints, transport: nodeTransport(), bearerToken: tokens.app });
    try {
      const key = "app/console";
      await app.acquire(key, { ttlMs: 60_000, wait: false });
      const ui = await ctx.newPage();
      await ui.goto(`http://${secure.endpoints[0]}/ui/?prefix=app/`);
      // No token yet: the listing and the watch are refused, and say so.
      await ui.waitForFunction(() => document.getElementById("error").textContent !== "", null, { timeout: 10_000 });
      await ui.fill("#token", tokens.ops);
      await ui.dispatchEvent("#token", "change");
      const row = `#locks tr[data-key="${key}"]`;
      await ui.waitForSelector(row, { timeout: 10_000 });
      assert.equal(await ui.evaluate(() => sessionStorage.getItem("ticketd.token")), tokens.ops);
      await ui.fill("#forcekey", key);
      await ui.click("#force button");
      await ui.waitForSelector(row, { state: "detached", timeout: 5000 });
      await ui.waitForSelector(`#events li[data-type="RELEASED"][data-key="${key}"]`, { timeout: 5000 });
      assert.equal((await app.getLock(key)).held, false, "the admin's force release ended app's lock");
      await ui.close();
    } finally {
      await app.close();
      await secure.close();
    }
  });
});
