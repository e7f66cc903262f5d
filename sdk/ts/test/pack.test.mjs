// The package as a user gets it: `npm pack` in a copy of the package's
// committed files (no dist/, as in a fresh clone; node_modules linked in for
// the build tools), the tarball installed into an empty project with
// --engine-strict (every dependency's engines must accept this Node), its
// type declarations checked by tsc, and a script importing
// "@ticketd/client" run against a real three-node cluster.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { after, before, describe, test } from "node:test";
import { startCluster } from "./cluster.mjs";

const run = promisify(execFile);
const pkgDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const npm = process.platform === "win32" ? "npm.cmd" : "npm";

/** sh runs a command, failing with its whole output. */
async function sh(cmd, args, cwd) {
  try {
    return await run(cmd, args, { cwd, maxBuffer: 64 << 20, env: { ...process.env, npm_config_update_notifier: "false" } });
  } catch (e) {
    throw new Error(`${cmd} ${args.join(" ")} (in ${cwd}) failed: ${e.message}\n${e.stdout ?? ""}\n${e.stderr ?? ""}`);
  }
}

// What the consumer runs: the package's main entry and its Node transport,
// a lock taken, checked and released; the browser entry must import too.
const script = `
import { createClient } from "@ticketd/client";
import { nodeTransport } from "@ticketd/client/node";
import { webTransport } from "@ticketd/client/web";
if (typeof webTransport !== "function") throw new Error("no webTransport");
const client = createClient({ endpoints: process.argv.slice(2), transport: nodeTransport() });
const lease = await client.lock("pack/check", { ttlMs: 10000 });
const check = await client.checkToken("pack/check", lease.token);
await lease.release();
const info = await client.getLock("pack/check");
await client.close();
console.log(JSON.stringify({ token: String(lease.token), valid: check.valid, heldAfter: info.held }));
`;

// The same in TypeScript with types the package must declare: an unresolved
// declaration is an error under --strict (TS7016), a wrong one a type error.
const typed = `
import { createClient, Lease, LockedError } from "@ticketd/client";
import { nodeTransport } from "@ticketd/client/node";
import { webTransport } from "@ticketd/client/web";
export async function use(endpoints: string[]): Promise<bigint> {
  const client = createClient({ endpoints, transport: nodeTransport() });
  const web = createClient({ endpoints, transport: webTransport() });
  const lease: Lease = await client.lock("pack/check", { ttlMs: 10000 });
  const token: bigint = lease.token;
  const signal: AbortSignal = lease.signal;
  await lease.release();
  await client.close();
  await web.close();
  return signal.aborted || new LockedError("x") instanceof Error ? token : 0n;
}
`;

describe("npm pack of @ticketd/client", () => {
  let tmp;
  let cluster;
  before(async () => {
    tmp = mkdtempSync(path.join(os.tmpdir(), "ticketd-pack-"));
    cluster = await startCluster();
  });
  after(async () => {
    await cluster?.close();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  test("packs_installs_and_runs_from_a_fresh_copy", async () => {
    // The committed files only, as a fresh clone has them.
    const src = path.join(tmp, "src");
    const { stdout: tracked } = await sh("git", ["ls-files", "-z", "."], pkgDir);
    for (const f of tracked.split("\0").filter(Boolean)) {
      mkdirSync(path.dirname(path.join(src, f)), { recursive: true });
      cpSync(path.join(pkgDir, f), path.join(src, f));
    }
    assert.ok(!readdirSync(src).includes("dist"), "dist/ is committed: the copy is not fresh");
    symlinkSync(path.join(pkgDir, "node_modules"), path.join(src, "node_modules"), "dir");

    const { stdout: packed } = await sh(npm, ["pack", "--json", "--pack-destination", tmp], src);
    // The JSON report follows whatever the prepack script printed.
    const [info] = JSON.parse(packed.slice(packed.search(/^\[/m)));
    const files = info.files.map((f) => f.path).sort();
    for (const f of ["package.json", "README.md", "dist/index.js", "dist/index.d.ts", "dist/node.js", "dist/node.d.ts", "dist/web.js", "dist/web.d.ts"]) {
      assert.ok(files.includes(f), `tarball lacks ${f}: ${files.join(", ")}`);
    }
    for (const f of files) {
      assert.ok(f === "package.json" || f === "README.md" || f.startsWith("dist/"), `tarball ships ${f}`);
    }

    const app = path.join(tmp, "app");
    mkdirSync(app);
    writeFileSync(path.join(app, "package.json"), JSON.stringify({ name: "pack-check", private: true, type: "module" }));
    await sh(npm, ["install", "--engine-strict", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error",
      path.join(tmp, info.filename)], app);

    writeFileSync(path.join(app, "check.ts"), typed);
    await sh(process.execPath, [path.join(pkgDir, "node_modules", "typescript", "bin", "tsc"), "--noEmit", "--strict",
      "--module", "nodenext", "--moduleResolution", "nodenext", "--target", "es2022", "--lib", "es2022,dom",
      "--typeRoots", path.join(pkgDir, "node_modules", "@types"), "--types", "node", "check.ts"], app);

    writeFileSync(path.join(app, "check.mjs"), script);
    const { stdout } = await sh(process.execPath, ["check.mjs", ...cluster.endpoints], app);
    const got = JSON.parse(stdout.trim().split("\n").pop());
    assert.ok(BigInt(got.token) > 0n, `token ${got.token}`);
    assert.equal(got.valid, true);
    assert.equal(got.heldAfter, false);
  });
});
