/**
 * The review every signature follows, offline (`batch sign`) and online (`batch approve`, `batch
 * create --key`): the summary a person reads, and the refusals that stop a signature before it is
 * made: an unbound leaf (UNBOUND_SCOPE), a window closed or too long (INVALID_STATE), a batch that
 * is not what `--expect` lists (SCOPE_UNEXPECTED).
 */
import type { BatchStatement, ScopeLeaf } from '@better-compute/core/quorum';
import { isRecord } from '@better-compute/core';
import { CliError } from '../../errors.js';
import type { ResolvedIO } from '../../define.js';
import { readTextFile } from './files.js';

/** Subjects shown per command group before "…". */
const SUBJECTS_SHOWN = 10;
const MAX_EXPECT_BYTES = 16 * 1024 * 1024;

/** How a leaf's operation reads: its kind and payload, or that any payload is admitted. */
function operationOf(leaf: ScopeLeaf): string {
  if (leaf.payload === null) return `${leaf.kind} (any payload)`;
  const fields = Object.entries(leaf.payload).map(([name, value]) => `${name}=${value}`);
  return fields.length === 0 ? leaf.kind : `${leaf.kind} ${fields.join(' ')}`;
}

export interface ReviewedBatch {
  statement: BatchStatement;
  reason?: string;
  proposedBy?: string;
  /** Absent when signing a bare root with --unchecked. */
  leaves?: readonly ScopeLeaf[];
}

/**
 * The lines that say what the batch is: the batch and its reason, who proposed it (an agent's
 * warning line always; a person only when `creator` is asked for), then, when they are listed,
 * the commands by operation with their subjects, as the guide's summary shows them.
 */
function batchLines(batch: ReviewedBatch, creator: boolean): string[] {
  const lines = [`Batch ${batch.statement.batchId}${batch.reason ? `: ${batch.reason}` : ''}`];
  if (batch.proposedBy?.startsWith('Proposed by agent')) lines.push(batch.proposedBy);
  else if (batch.proposedBy && creator) lines.push(`Created by ${batch.proposedBy}.`);
  if (batch.leaves) {
    const groups = new Map<string, string[]>();
    for (const leaf of batch.leaves) {
      const operation = operationOf(leaf);
      groups.set(operation, [...(groups.get(operation) ?? []), leaf.subject]);
    }
    const subjects = new Set(batch.leaves.map((leaf) => leaf.subject)).size;
    const counts = [...groups].map(([operation, list]) => `${operation} ×${list.length}`).join(', ');
    lines.push(`${batch.leaves.length} command(s) on ${subjects} subject(s): ${counts}:`);
    for (const [operation, list] of groups)
      lines.push(
        `  ${operation}: ${list.slice(0, SUBJECTS_SHOWN).join(', ')}${list.length > SUBJECTS_SHOWN ? ', …' : ''}`,
      );
  }
  return lines;
}

/** The summary `batch sign` prints: the batch, who created it, the commands, the root and window. */
export function summaryLines(batch: ReviewedBatch, rootHex: string): string[] {
  const { statement } = batch;
  return [
    ...batchLines(batch, true),
    ...(batch.leaves
      ? []
      : [`${statement.size} command(s), not listed: signing the root alone (--unchecked).`]),
    `Root ${rootHex}, size ${statement.size}; trust domain ${statement.trustDomain}.`,
    `The window closes at ${new Date(statement.notAfter).toISOString()}.`,
  ];
}

/** The summary `batch approve` prints, as the guide shows it: the batch, the commands, the approvals so far and the window. */
export function approvalSummaryLines(
  batch: ReviewedBatch,
  approvals: { had: number; needed: number },
): string[] {
  return [
    ...batchLines(batch, false),
    `Approvals: ${approvals.had} of ${approvals.needed}; the window closes at ${new Date(batch.statement.notAfter).toISOString()}.`,
  ];
}

/** What the review flags ask, as `batch sign` and `batch approve` take them. */
export interface ReviewFlags {
  maxHours: number;
  allowUnbound: boolean;
  expect?: string | undefined;
}

/**
 * The review's refusals, in order: the window (INVALID_STATE), then, when the leaves are listed,
 * unbound leaves (UNBOUND_SCOPE) and the `--expect` file (SCOPE_UNEXPECTED).
 */
export async function checkReview(
  io: ResolvedIO,
  batch: ReviewedBatch,
  createdAt: number | undefined,
  flags: ReviewFlags,
): Promise<void> {
  checkWindow(batch.statement, createdAt, Date.now(), flags.maxHours);
  if (!batch.leaves) return;
  checkUnbound(batch.leaves, flags.allowUnbound);
  if (flags.expect !== undefined)
    checkExpected(
      batch.leaves,
      parseExpectation(await readTextFile(io, flags.expect, '--expect', MAX_EXPECT_BYTES), flags.expect),
    );
}

/**
 * INVALID_STATE when the window has closed, or stays open longer than `maxHours`, counted from the
 * batch's creation and from now (a creation time in the past cannot stretch it).
 */
function checkWindow(
  statement: BatchStatement,
  createdAt: number | undefined,
  now: number,
  maxHours: number,
): void {
  if (statement.notAfter <= now)
    throw new CliError(
      'INVALID_STATE',
      `the batch's window closed at ${new Date(statement.notAfter).toISOString()}`,
      {
        hint: 'An expired batch can no longer be approved; ask for a new one.',
      },
    );
  const longest = maxHours * 3_600_000;
  const from = createdAt === undefined ? now : Math.min(createdAt, now);
  if (statement.notAfter - from > longest || statement.notAfter - now > longest) {
    const hours = ((statement.notAfter - from) / 3_600_000).toFixed(1);
    throw new CliError(
      'INVALID_STATE',
      `the batch stays open ${hours} hours, longer than --max-hours ${maxHours}`,
      {
        hint: 'Ask for a batch with a shorter window, or pass a larger --max-hours if you mean to allow it.',
      },
    );
  }
}

/** UNBOUND_SCOPE when some leaves admit any payload and `--allow-unbound` was not given. */
export function checkUnbound(leaves: readonly ScopeLeaf[], allowUnbound: boolean): void {
  const unbound = leaves.filter((leaf) => leaf.payload === null);
  if (unbound.length === 0 || allowUnbound) return;
  const named = unbound
    .slice(0, 5)
    .map((leaf) => `${leaf.kind} on ${leaf.subject}`)
    .join(', ');
  throw new CliError(
    'UNBOUND_SCOPE',
    `${unbound.length} leaf(s) admit any payload of their kind: ${named}${unbound.length > 5 ? ', …' : ''}`,
  );
}

/** What `--expect FILE` holds: one subject per line, or a JSON list of `{ subject, kind }` commands. */
function parseExpectation(
  text: string,
  path: string,
): { keyOf: (leaf: ScopeLeaf) => string; expected: string[] } {
  const trimmed = text.trim();
  if (trimmed.startsWith('[')) {
    let list: unknown;
    try {
      list = JSON.parse(trimmed);
    } catch {
      list = null;
    }
    const ok =
      Array.isArray(list) &&
      (list as unknown[]).every(
        (item) => isRecord(item) && typeof item.subject === 'string' && typeof item.kind === 'string',
      );
    if (!ok)
      throw new CliError(
        'INVALID_ARGUMENT',
        `${path} (--expect) is not a JSON list of { subject, kind } commands`,
        {
          hint: 'Write one subject per line, or [{ "subject": "node_01…", "kind": "metal.power" }, …].',
          details: { field: 'expect' },
        },
      );
    return {
      keyOf: (leaf) => `${leaf.kind} on ${leaf.subject}`,
      expected: (list as { subject: string; kind: string }[]).map(
        (item) => `${item.kind} on ${item.subject}`,
      ),
    };
  }
  const expected = trimmed
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
  return { keyOf: (leaf) => leaf.subject, expected };
}

/** SCOPE_UNEXPECTED unless the batch holds exactly what `--expect` lists (as multisets); names the differences. */
function checkExpected(leaves: readonly ScopeLeaf[], expectation: ReturnType<typeof parseExpectation>): void {
  const remaining = new Map<string, number>();
  for (const key of expectation.expected) remaining.set(key, (remaining.get(key) ?? 0) + 1);
  const extra: string[] = [];
  for (const leaf of leaves) {
    const key = expectation.keyOf(leaf);
    const left = remaining.get(key) ?? 0;
    if (left === 0) extra.push(key);
    else remaining.set(key, left - 1);
  }
  const missing = [...remaining].flatMap(([key, count]) => Array<string>(count).fill(key));
  if (extra.length === 0 && missing.length === 0) return;
  const list = (items: string[]) =>
    `${items.slice(0, 5).join(', ')}${items.length > 5 ? `, … (${items.length})` : ''}`;
  const parts = [
    ...(extra.length ? [`not expected: ${list(extra)}`] : []),
    ...(missing.length ? [`expected but absent: ${list(missing)}`] : []),
  ];
  throw new CliError('SCOPE_UNEXPECTED', `the batch is not what --expect lists; ${parts.join('; ')}`);
}
