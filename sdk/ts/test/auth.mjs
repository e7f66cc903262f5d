// Authorization fixtures of the tests: bearer tokens, and a tokens file
// (SHA-256 digests only, as `ticketctl auth hash-token` writes them) and a
// policy (docs/security.md) written into a cluster's directory.
import { createHash } from "node:crypto";
import { writeFileSync } from "node:fs";
import path from "node:path";

/** tokens are the bearer tokens of the principals ops (admin), app and other (lock on app/). */
export const tokens = { ops: "ops-0123456789abcdef", app: "app-0123456789abcdef", other: "oth-0123456789abcdef" };

/** authArgs writes the tokens file and the policy into dir and returns ticketd's flags naming them. */
export function authArgs(dir) {
  const digest = (t) => createHash("sha256").update(t).digest("hex");
  const tokensFile = path.join(dir, "tokens.yaml");
  writeFileSync(tokensFile, "tokens:\n" + Object.entries(tokens)
    .map(([p, t]) => `  - principal: ${p}\n    sha256: ${digest(t)}\n`).join(""), { mode: 0o600 });
  const policyFile = path.join(dir, "policy.yaml");
  writeFileSync(policyFile, [
    "rules:",
    "  - principal: ops",
    "    allow: [admin]",
    "  - principal: app",
    '    prefix: "app/"',
    "    allow: [lock]",
    "  - principal: other",
    '    prefix: "app/"',
    "    allow: [lock]",
    "",
  ].join("\n"), { mode: 0o600 });
  return ["--auth-tokens-file", tokensFile, "--auth-policy-file", policyFile];
}
