// Builds the web console (console/: index.html, app.css, app.ts with the
// client from src/) into server/console/dist, the files ticketd embeds.
// The build is deterministic (esbuild, pinned; no timestamps, no source
// maps), so the committed files can be checked: `--check` rebuilds in
// memory and exits 1, naming the files, when the committed ones differ.
import { build } from "esbuild";
import { mkdirSync, readFileSync, writeFileSync, existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "..");
const out = path.resolve(root, "../../server/console/dist");

/** consoleFiles returns the built console as {name: bytes}. */
export async function consoleFiles() {
  const res = await build({
    entryPoints: [path.join(root, "console/app.ts")],
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    minify: true,
    legalComments: "none",
    charset: "utf8",
    write: false,
    outfile: "app.js",
    logLevel: "error",
  });
  return {
    "app.js": Buffer.from(res.outputFiles[0].contents),
    "app.css": readFileSync(path.join(root, "console/app.css")),
    "index.html": readFileSync(path.join(root, "console/index.html")),
  };
}

/** staleFiles returns the names of committed files that differ from a fresh build. */
export async function staleFiles() {
  const files = await consoleFiles();
  return Object.entries(files)
    .filter(([name, bytes]) => {
      const p = path.join(out, name);
      return !existsSync(p) || !readFileSync(p).equals(bytes);
    })
    .map(([name]) => name);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv.includes("--check")) {
    const stale = await staleFiles();
    if (stale.length > 0) {
      console.error(`server/console/dist is stale (${stale.join(", ")}): run 'make console' and commit the result`);
      process.exit(1);
    }
  } else {
    mkdirSync(out, { recursive: true });
    for (const [name, bytes] of Object.entries(await consoleFiles())) writeFileSync(path.join(out, name), bytes);
    console.log(`built ${out}`);
  }
}
