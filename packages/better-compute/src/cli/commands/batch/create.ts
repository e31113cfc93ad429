/**
 * `batch create --reason TEXT --scope FILE [--hours N] [--key KEY]`: commandBatches.create from `{
 * subject, kind, payload }` leaves (a JSON list, or a scope file's `leaves`). With `--key`, the
 * creator also approves it at once: the batch the server made is read back and verified like any
 * other (verified-batch.ts), and signed only when its root is the root of the leaves in FILE, so
 * the creator signs exactly what they wrote, never the server's idea of it.
 */
import { CliError } from '../../errors.js';
import { defineCommand } from '../../define.js';
import { defined } from '../shared.js';
import { readJsonFile, readKeyFile } from './files.js';
import { checkUnbound } from './review.js';
import { approvalSummaryOf, assertPending, readVerifiedBatch, submitApproval } from './verified-batch.js';

/** 500 leaves (the most one call takes) fit in far less; a larger file is a wrong path. */
const MAX_LEAVES_BYTES = 16 * 1024 * 1024;
/** The most leaves one commandBatches.create takes (MAX_CREATE_LEAVES). */
const MAX_LEAVES = 500;
/** The window the server may add to --hours, for its own clock and the call's time. */
const WINDOW_SLACK_MS = 5 * 60_000;
const LEAVES_HINT =
  'The file holds a JSON list of { "subject": "node_01…", "kind": "metal.power", "payload": { "action": "off" } } leaves, or a scope file with "leaves".';

export default defineCommand({
  name: 'batch create',
  group: 'Batches',
  summary:
    'Create a batch of destructive commands, held until enough approvers sign it; --key approves it at once as you',
  description:
    'Each leaf is { subject, kind, payload }, the payload as its kind declares it (a power leaf takes { action: off, reset or cycle }); a null payload admits any payload of the kind and needs runWith, the payload its command runs with.',
  target: 'token',
  calls: ['commandBatches.create', 'commandBatches.get', 'commandBatches.scope', 'commandBatches.approve'],
  flags: {
    reason: {
      type: 'string',
      required: true,
      description: 'Why these commands: what the approvers read first (up to 500 characters)',
      placeholder: 'TEXT',
    },
    scope: {
      type: 'string',
      required: true,
      description: 'The leaves: a JSON list of { subject, kind, payload }, or a scope file’s "leaves"',
      placeholder: 'FILE',
    },
    hours: {
      type: 'number',
      integer: true,
      min: 1,
      max: 72,
      description: 'How long the batch stays open for approval (the server’s default is 24)',
      placeholder: 'N',
    },
    key: {
      type: 'string',
      description:
        'Your approver key (mode 0600): approve the batch at once, once its root is that of FILE’s leaves',
      placeholder: 'KEY',
    },
    allowUnbound: {
      type: 'boolean',
      description: 'With --key: also approve leaves that admit any payload of their kind',
    },
  },
  examples: [
    'better-compute batch create --tenant acme --reason "power off rack 12 for the PDU swap" --scope rack12.json',
    'better-compute batch create --tenant acme --reason "reimage rack 12 after the firmware recall" --scope rack12.json --hours 6 --key ~/.better-compute/approver.pem',
  ],
  async run({ flags, io, log, api }) {
    const quorum = await import('@better-compute/core/quorum');
    const input = readLeaves(
      await readJsonFile(io, flags.scope, '--scope', MAX_LEAVES_BYTES, LEAVES_HINT),
      flags.scope,
      quorum.leafProblem,
    );
    const leaves = input.map(({ subject, kind, payload }) => ({ subject, kind, payload }));
    // The key and the leaves' payloads are checked before anything is created.
    const key = flags.key === undefined ? undefined : await readKeyFile(io, flags.key);
    if (key) checkUnbound(leaves, flags.allowUnbound);
    const client = await api();
    const created = await client.call('commandBatches.create', {
      reason: flags.reason,
      leaves: input,
      ...defined({ hours: flags.hours }),
    });
    log(
      `Created batch ${created.id}: ${created.size} command(s); ${created.approvalsNeeded} approval(s) needed.`,
    );
    if (!key) return created;

    const verified = await readVerifiedBatch(client, created.id);
    assertPending(verified.batch);
    const root = quorum.toHex(quorum.scopeTree(leaves).root);
    if (verified.scope.root !== root)
      throw new CliError(
        'SCOPE_CHANGED',
        `batch ${created.id} has root ${verified.scope.root}, not the root ${root} of the leaves in ${flags.scope}`,
        {
          hint: `Nothing was signed. Cancel it ("better-compute batch cancel --batch ${created.id}") and report it: the server made another batch than the one you sent.`,
        },
      );
    // Without --hours the server picks its default; no batch stays open longer than 72 hours.
    const longest = (flags.hours ?? 72) * 3_600_000 + WINDOW_SLACK_MS;
    if (verified.statement.notAfter - Date.now() > longest)
      throw new CliError(
        'INVALID_STATE',
        `batch ${created.id} stays open until ${verified.scope.notAfter}, longer than the window asked for`,
        {
          hint: `Nothing was signed. Cancel it ("better-compute batch cancel --batch ${created.id}") and report it.`,
        },
      );
    for (const line of approvalSummaryOf(verified)) log(line);
    return submitApproval(client, log, verified, quorum.signApproval(key.privateKey, verified.statement));
  },
});

type InputLeaf = {
  subject: string;
  kind: string;
  payload: Record<string, string> | null;
  runWith?: Record<string, string>;
};

/**
 * The leaves of FILE, each checked as the server and the review check it, so a mistake is named
 * here by its index rather than by the server's schema path. `runWith`, the payload an unbound
 * leaf's command runs with, is passed through for the server to check.
 */
function readLeaves(
  document: unknown,
  path: string,
  leafProblem: (value: unknown) => string | null,
): InputLeaf[] {
  const invalid = (message: string) =>
    new CliError('INVALID_ARGUMENT', `${path} (--scope) ${message}`, {
      hint: LEAVES_HINT,
      details: { field: 'scope' },
    });
  const list = Array.isArray(document)
    ? document
    : typeof document === 'object' &&
        document !== null &&
        Array.isArray((document as { leaves?: unknown }).leaves)
      ? (document as { leaves: unknown[] }).leaves
      : undefined;
  if (!list) throw invalid('is neither a JSON list of leaves nor a scope file with "leaves"');
  if (list.length === 0 || list.length > MAX_LEAVES)
    throw invalid(`holds ${list.length} leaves; a batch takes 1 to ${MAX_LEAVES}`);
  return list.map((item, index) => {
    if (typeof item !== 'object' || item === null || Array.isArray(item))
      throw invalid(`leaf ${index} is not an object`);
    const { runWith, ...leaf } = item as Record<string, unknown>;
    const problem = leafProblem(leaf);
    if (problem) throw invalid(`leaf ${index}: ${problem}`);
    if (runWith !== undefined && leaf.payload !== null)
      throw invalid(
        `leaf ${index}: "runWith" is for a leaf whose payload is null; a bound leaf runs with its payload`,
      );
    return {
      ...(leaf as Omit<InputLeaf, 'runWith'>),
      ...(runWith === undefined ? {} : { runWith: runWith as Record<string, string> }),
    };
  });
}
