// A node:test reporter that names the tests still running when a test file
// is stopped: by --test-timeout (in Node 20 it bounds every test file as a
// whole too, and the file's limit fires first, so the spec reporter names
// only the file) or by a SIGTERM (the wall-clock limit of `make test`,
// scripts/test-suite.sh). It prints nothing otherwise. Used beside the spec
// reporter (package.json's test scripts):
//
//   node --test --test-reporter=spec --test-reporter-destination=stdout \
//     --test-reporter=./test/running-reporter.mjs --test-reporter-destination=stderr ...
//
// A test file runs in a child process whose events (test:dequeue when a
// test starts, test:complete when it ends) reach the reporter as they
// happen; the reporter keeps, per file, the chain of suites and the test
// that have started and not completed.
import path from "node:path";
import { writeSync } from "node:fs";

/** running maps a test file to the names of its started, unfinished tests, outermost first. */
const running = new Map();

function rel(file) {
  return file ? path.relative(process.cwd(), file) : "?";
}

function describeRunning(file) {
  const chain = running.get(file) ?? [];
  return chain.length > 0 ? chain.join(" › ") : "no test (a hook, or an open handle kept the file alive)";
}

// A run stopped from outside (the test runner turns SIGTERM and SIGINT
// into process.exit) names what every unfinished file was doing. Written
// with writeSync so it is out before the process ends; after a complete
// run no file is left and nothing is written.
process.once("exit", () => {
  for (const file of running.keys()) {
    writeSync(2, `✖ ${rel(file)}: stopped while running: ${describeRunning(file)}\n`);
  }
});

export default async function* runningReporter(source) {
  for await (const { type, data } of source) {
    if (!data?.file) continue;
    // The test that stands for a whole file is named by the file's path.
    const isFile = data.name === data.file;
    if (type === "test:dequeue") {
      if (isFile) running.set(data.file, []);
      else {
        const chain = running.get(data.file) ?? [];
        chain.length = Math.min(chain.length, data.nesting);
        chain.push(data.name);
        running.set(data.file, chain);
      }
    } else if (type === "test:complete") {
      if (!isFile) {
        const chain = running.get(data.file);
        if (chain) chain.length = Math.min(chain.length, data.nesting);
        continue;
      }
      const err = data.details?.error;
      if (!data.details?.passed && (err?.failureType === "testTimeoutFailure" || running.get(data.file)?.length > 0)) {
        const why = err?.failureType === "testTimeoutFailure" ? err.message : `failed (${err?.message ?? "no error"})`;
        yield `✖ ${rel(data.file)}: ${why} while running: ${describeRunning(data.file)}\n`;
      }
      running.delete(data.file);
    }
  }
}
