/**
 * `batch approve --batch ID --key PATH`: the online review and signature. The batch and its whole
 * scope are read and the root recomputed (verified-batch.ts), the review of `batch sign` runs on
 * them (review.ts), and the guide's summary is printed. Without --yes or --root it stops there,
 * exit status 1 (docs/decisions/batch-cli.md); --root approves only a batch that still has the root
 * the person reviewed. `--signature FILE` submits an approval `batch sign` made offline, after
 * checking it signs this batch as the server describes it and as its leaves give it.
 */
import { CliError, markReported } from '../../errors.js';
import { defineCommand } from '../../define.js';
import { readJsonFile, readKeyFile } from './files.js';
import { checkReview } from './review.js';
import {
  approvalSummaryOf,
  assertPending,
  readVerifiedBatch,
  reviewedOf,
  submitApproval,
} from './verified-batch.js';

/** An approval file is a few hundred bytes. */
const MAX_APPROVAL_BYTES = 64 * 1024;

export default defineCommand({
  name: 'batch approve',
  group: 'Batches',
  summary: 'Review a batch (its scope listed and its root recomputed), then sign and submit your approval',
  description:
    'Without --yes or --root it prints the summary and stops. --root approves only while the batch has the root you reviewed; --signature submits an approval "batch sign" made offline.',
  target: 'token',
  calls: ['commandBatches.get', 'commandBatches.scope', 'commandBatches.approve'],
  flags: {
    batch: {
      type: 'id',
      kind: 'batch',
      required: true,
      description: 'The batch to approve',
      placeholder: 'ID',
    },
    key: {
      type: 'string',
      description: 'Your approver key (mode 0600): review and sign here',
      placeholder: 'PATH',
    },
    signature: {
      type: 'string',
      description: 'Submit this approval, made offline by "batch sign", instead of signing here',
      placeholder: 'FILE',
    },
    yes: { type: 'boolean', description: 'Approve after the summary, without stopping' },
    root: {
      type: 'string',
      description: 'Approve only if the batch still has this root (64 hex digits), the one you reviewed',
      placeholder: 'R',
    },
    expect: {
      type: 'string',
      description:
        'Approve only a batch holding exactly these: one subject per line, or a JSON list of { subject, kind }',
      placeholder: 'FILE',
    },
    allowUnbound: {
      type: 'boolean',
      description: 'Also approve leaves that admit any payload of their kind',
    },
    maxHours: {
      type: 'number',
      min: 0,
      default: 72,
      description: 'Refuse a batch whose window is open longer than this',
      placeholder: 'H',
    },
  },
  examples: [
    'better-compute batch approve --tenant acme --batch batch_01k5w… --key ~/.better-compute/approver.pem',
    'better-compute batch approve --tenant acme --batch batch_01k5w… --key ~/.better-compute/approver.pem --root 3f1c… --expect rack12.txt',
    'better-compute batch approve --batch batch_01k5w… --signature approval.json',
  ],
  async run({ flags, io, log, api }) {
    if ((flags.key === undefined) === (flags.signature === undefined))
      throw new CliError(
        'INVALID_ARGUMENT',
        flags.key === undefined
          ? 'pass --key PATH to review and sign here, or --signature FILE to submit an approval made offline'
          : '--key signs here and --signature submits an approval made offline: pass one of them',
        { details: { field: flags.key === undefined ? 'key' : 'signature' } },
      );
    const quorum = await import('@better-compute/core/quorum');
    const client = await api();
    const verified = await readVerifiedBatch(client, flags.batch);
    assertPending(verified.batch);
    if (flags.root !== undefined && flags.root !== verified.scope.root)
      throw new CliError(
        'SCOPE_CHANGED',
        `batch ${flags.batch} has root ${verified.scope.root}, not the --root ${flags.root.slice(0, 64)} you reviewed`,
      );
    // An offline approval was reviewed where it was signed, unbound leaves included; the window
    // and --expect are checked again here, as they cost nothing.
    await checkReview(io, reviewedOf(verified), verified.createdAt, {
      maxHours: flags.maxHours,
      allowUnbound: flags.allowUnbound || flags.signature !== undefined,
      expect: flags.expect,
    });
    if (flags.signature !== undefined) {
      const document = await readJsonFile(
        io,
        flags.signature,
        '--signature',
        MAX_APPROVAL_BYTES,
        'Give the file "batch sign" wrote.',
      );
      // The server keeps the approver set: it checks the signature under the key; here the file must name this batch.
      const approval = quorum.readApprovalFile(document, verified.statement, () => undefined);
      for (const line of approvalSummaryOf(verified)) log(line);
      return submitApproval(client, log, verified, approval);
    }
    const key = await readKeyFile(io, flags.key!);
    for (const line of approvalSummaryOf(verified)) log(line);
    if (!flags.yes && flags.root === undefined) {
      const stop = `Not approved. Re-run with --yes, or with --root ${verified.scope.root}.`;
      log(stop);
      // The line above is the whole answer, as the guide shows it; runCli still rejects, so nothing
      // chained after it (`&&`, a script's status check) takes the batch for approved.
      throw markReported(new CliError('CONFIRMATION_REQUIRED', stop), 1);
    }
    return submitApproval(client, log, verified, quorum.signApproval(key.privateKey, verified.statement));
  },
});
