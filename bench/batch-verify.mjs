#!/usr/bin/env node
// The review of a 10,000-leaf batch scope as `batch sign` does it (issue 34: goal under 1 s): parse
// the scope file's JSON, check every leaf against its kind, encode each canonically, rebuild the
// RFC 6962 root and compare it, against a baseline measured in the same run: the bare RFC 6962 root
// over the same leaves' bytes, already encoded. Alternating slices, so a slow moment of the machine
// hits both alike; prints medians and the ratio. A benchmark, not a test: it never fails.
// Usage: node bench/batch-verify.mjs [leaves] [rounds]
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const leavesWanted = Number(process.argv[2] ?? 10_000);
const rounds = Number(process.argv[3] ?? 15);
if (!existsSync(join(root, 'packages', 'core', 'dist', 'quorum', 'index.js'))) {
  execFileSync(process.execPath, [join(root, 'scripts', 'build.mjs')], { stdio: 'inherit' });
}
const quorum = await import(join(root, 'packages', 'core', 'dist', 'quorum', 'index.js'));
const merkle = await import(join(root, 'packages', 'core', 'dist', 'merkle.js'));

const kinds = [
  (n) => ({ kind: 'metal.power', payload: { action: ['off', 'reset', 'cycle'][n % 3] } }),
  () => ({ kind: 'metal.deploy', payload: { image: 'img_01k5w0000000000000000000ab', profile: 'raid1' } }),
  () => ({ kind: 'node.reimage', payload: { image: 'img_01k5w0000000000000000000ab' } }),
  () => ({ kind: 'node.delete', payload: {} }),
];
const leaves = Array.from({ length: leavesWanted }, (_, n) => ({
  subject: `node_01k5w${String(n).padStart(21, '0')}`,
  ...kinds[n % kinds.length](n),
}));
const tree = quorum.scopeTree(leaves);
const now = Date.now();
const text = JSON.stringify({
  format: quorum.SCOPE_FORMAT,
  batchId: 'batch_01k5w00000000000000000000a',
  trustDomain: 'compute.example.com',
  createdAt: new Date(now).toISOString(),
  notAfter: new Date(now + 3_600_000).toISOString(),
  reason: 'benchmark',
  leaves,
  root: quorum.toHex(tree.root),
  size: tree.size,
});
const encoded = leaves.map((leaf) => quorum.leafBytes(leaf));

const cases = {
  'bare RFC 6962 root': () => {
    const builder = new merkle.TreeBuilder();
    for (const bytes of encoded) builder.append(merkle.leafHash(bytes));
    return builder.root();
  },
  'batch sign review': () => quorum.readScopeFile(JSON.parse(text)).statement.root,
};
const samples = Object.fromEntries(Object.keys(cases).map((name) => [name, []]));
for (const run of Object.values(cases)) run(); // warm up
for (let i = 0; i < rounds; i++) {
  for (const [name, run] of Object.entries(cases)) {
    const start = process.hrtime.bigint();
    const answer = run();
    samples[name].push(Number(process.hrtime.bigint() - start) / 1e6);
    if (!merkle.sameHash(answer, tree.root)) throw new Error(`${name} computed another root`);
  }
}
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const baseline = median(samples['bare RFC 6962 root']);
console.log(
  `Scope review of ${leavesWanted} leaves (${(text.length / 1e6).toFixed(1)} MB of JSON), median of ${rounds} (node ${process.version})`,
);
for (const name of Object.keys(cases)) {
  const m = median(samples[name]);
  const goal = name === 'batch sign review' ? ' (goal < 1000 ms)' : '';
  console.log(`  ${name.padEnd(22)} ${m.toFixed(1).padStart(8)} ms  ${(m / baseline).toFixed(2)}x${goal}`);
}
