/**
 * `batch sign --key PATH --scope FILE`: the review and signature of `batch approve`, on a machine
 * with no network. The scope file is what `batch show --scope-out` wrote; its root is recomputed
 * from its leaves (SCOPE_MISMATCH when it differs), the summary is printed on stderr, and the
 * approval (what `batch approve --signature` submits) goes to stdout or a new `--out` file.
 * Without a scope file, a bare `--root` and `--size` (with `--batch`, `--trust-domain` and
 * `--not-after`) are signed only with `--unchecked`: nothing was reviewed.
 */
import { CliError } from '../../errors.js';
import { defineCommand } from '../../define.js';
import { readJsonFile, readKeyFile, writeJsonOut } from './files.js';
import { checkReview, type ReviewedBatch, summaryLines } from './review.js';

/** A 100,000-leaf scope with long subjects and payloads stays under this. */
const MAX_SCOPE_BYTES = 64 * 1024 * 1024;

export default defineCommand({
  name: 'batch sign',
  group: 'Batches',
  summary: 'Review a batch’s scope file and sign an approval of it, offline',
  description:
    'The root is recomputed from the leaves before anything is signed; the summary goes to stderr and the approval to stdout or --out, for "batch approve" to submit.',
  target: 'none',
  flags: {
    key: {
      type: 'string',
      required: true,
      description: 'Your approver key (mode 0600)',
      placeholder: 'PATH',
    },
    scope: {
      type: 'string',
      description: 'The scope file of the batch, as "batch show" writes it',
      placeholder: 'FILE',
    },
    root: {
      type: 'string',
      description: 'Sign only if the batch has this root (64 hex digits)',
      placeholder: 'R',
    },
    size: {
      type: 'number',
      integer: true,
      min: 1,
      description: 'Sign only if the batch has this many leaves',
      placeholder: 'N',
    },
    unchecked: {
      type: 'boolean',
      description: 'Sign a bare --root and --size with no scope file: nothing is reviewed',
    },
    batch: { type: 'id', kind: 'batch', description: 'With --unchecked: the batch id', placeholder: 'ID' },
    trustDomain: {
      type: 'string',
      description: 'With --unchecked: the deployment’s trust domain',
      placeholder: 'NAME',
    },
    notAfter: {
      type: 'string',
      description: 'With --unchecked: the end of the window, as 2026-09-25T18:00:00.000Z',
      placeholder: 'TIME',
    },
    expect: {
      type: 'string',
      description:
        'Sign only a batch holding exactly these: one subject per line, or a JSON list of { subject, kind }',
      placeholder: 'FILE',
    },
    allowUnbound: { type: 'boolean', description: 'Also sign leaves that admit any payload of their kind' },
    maxHours: {
      type: 'number',
      min: 0,
      default: 72,
      description: 'Refuse a batch whose window is open longer than this',
      placeholder: 'H',
    },
    out: {
      type: 'string',
      description: 'Write the approval to this new file instead of stdout',
      placeholder: 'FILE',
    },
  },
  examples: [
    'better-compute batch sign --key approver.pem --scope batch.json > approval.json',
    'better-compute batch sign --key approver.pem --scope batch.json --expect rack12.txt --out approval.json',
    'better-compute batch sign --key approver.pem --unchecked --batch batch_01k5w… --trust-domain compute.example.com --root 3f1c… --size 12 --not-after 2026-09-25T18:00:00.000Z',
  ],
  async run({ flags, io, log }) {
    const quorum = await import('@better-compute/core/quorum');
    let batch: ReviewedBatch;
    let createdAt: number | undefined;
    if (flags.scope !== undefined) {
      if (flags.unchecked)
        throw new CliError(
          'INVALID_ARGUMENT',
          '--unchecked signs a bare root; with --scope the leaves are checked',
          {
            details: { field: 'unchecked' },
          },
        );
      const document = await readJsonFile(
        io,
        flags.scope,
        '--scope',
        MAX_SCOPE_BYTES,
        'Give the scope file "batch show" wrote.',
      );
      const read = quorum.readScopeFile(document);
      createdAt = read.createdAt;
      batch = {
        statement: read.statement,
        reason: read.file.reason,
        proposedBy: read.file.proposedBy,
        leaves: read.file.leaves,
      };
      if (flags.root !== undefined && flags.root !== read.file.root)
        throw new CliError(
          'SCOPE_CHANGED',
          `the scope's root is ${read.file.root}, not the --root ${flags.root.slice(0, 64)} you reviewed`,
        );
      if (flags.size !== undefined && flags.size !== read.statement.size)
        throw new CliError(
          'SCOPE_CHANGED',
          `the scope has ${read.statement.size} leaves, not the --size ${flags.size} you reviewed`,
        );
    } else {
      batch = { statement: uncheckedStatement(flags, quorum) };
      if (flags.expect !== undefined)
        throw new CliError('INVALID_ARGUMENT', '--expect needs the leaves: pass --scope FILE', {
          details: { field: 'expect' },
        });
    }
    await checkReview(io, batch, createdAt, flags);
    const key = await readKeyFile(io, flags.key);
    for (const line of summaryLines(batch, quorum.toHex(batch.statement.root))) log(line);
    const approval = quorum.approvalFile(
      batch.statement,
      quorum.signApproval(key.privateKey, batch.statement),
    );
    log(`Signed as ${key.kid}.`);
    if (flags.out === undefined) return approval;
    const path = await writeJsonOut(io, flags.out, approval, 'an approval is never written over a file');
    return {
      out: path,
      kid: approval.kid,
      batchId: approval.batchId,
      root: approval.root,
      size: approval.size,
    };
  },
});

/** The statement of `--unchecked`: every part from its flag, each checked as a scope file's would be. */
function uncheckedStatement(
  flags: {
    unchecked: boolean;
    root?: string;
    size?: number;
    batch?: string;
    trustDomain?: string;
    notAfter?: string;
  },
  quorum: typeof import('@better-compute/core/quorum'),
) {
  const missing = (['root', 'size', 'batch', 'trustDomain', 'notAfter'] as const).filter(
    (name) => flags[name] === undefined,
  );
  if (!flags.unchecked || missing.length > 0) {
    const kebab = (name: string) => `--${name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
    throw new CliError(
      'INVALID_ARGUMENT',
      flags.unchecked
        ? `--unchecked needs ${missing.map(kebab).join(', ')}`
        : 'pass --scope FILE to review the leaves; a bare --root and --size are signed only with --unchecked',
      {
        hint: 'Write the batch\'s scope file with "batch show" where the server can be reached, and pass it here with --scope FILE.',
        details: { field: flags.unchecked ? missing[0]! : 'scope' },
      },
    );
  }
  return quorum.parseStatementFields({
    batchId: flags.batch,
    trustDomain: flags.trustDomain,
    root: flags.root,
    size: flags.size,
    notAfter: flags.notAfter,
  });
}
