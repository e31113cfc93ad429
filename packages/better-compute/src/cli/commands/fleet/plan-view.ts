/**
 * What the fleet commands share: reading a FleetConfig file, and a plan or a drift in words, as the
 * guide shows them: `+` create, `~` update (each field from → to), `-` delete, `BLOCKED` with why,
 * then the planHash, and with --calls the calls apply would make.
 */
import type { FleetChange, FleetPlan } from '@better-compute/core/methods';
import { CliError } from '../../errors.js';
import type { GlobalOptions, ResolvedIO } from '../../define.js';

/** A FleetConfig file is at most what fleet.plan takes. */
const MAX_DOCUMENT_BYTES = 4 * 1024 * 1024;

/** Reads and parses the document a fleet command is given; the server checks its shape. */
export async function readFleetDocument(io: ResolvedIO, path: string): Promise<unknown> {
  const { readJsonFile } = await import('../batch/files.js');
  const document = await readJsonFile(
    io,
    path,
    'FILE',
    MAX_DOCUMENT_BYTES,
    'Give the file "better-compute fleet export --out FILE" wrote, edited.',
  );
  if (typeof document !== 'object' || document === null || Array.isArray(document))
    throw new CliError('INVALID_ARGUMENT', `${path} is not a FleetConfig document: it is not a JSON object`, {
      hint: 'Start from "better-compute fleet export --out FILE"; "better-compute fleet schema" prints its JSON Schema.',
    });
  return document;
}

/** Whether the command prints words (no --format or --query asked for its JSON). */
export function printsWords(global: GlobalOptions): boolean {
  return global.format === undefined && global.query === undefined;
}

const shown = (value: unknown) => (value === undefined ? 'none' : JSON.stringify(value));

/** One change as a line, and its fields under it. */
export function changeLines(change: FleetChange, noun = 'change'): string[] {
  const what = `${change.op} ${change.kind} ${change.name} (${change.id ?? `new, key ${change.key}`})`;
  const lines = [change.blocked === null ? what : `BLOCKED ${what}: ${change.blocked}`];
  for (const field of change.fields)
    lines.push(`    ${field.field}: ${shown(field.from)} → ${shown(field.to)}`);
  if (noun === 'drift' && change.op !== '~')
    lines[0] += change.op === '+' ? ': added since the apply' : ': gone since the apply';
  return lines;
}

/** The plan in words: its changes, the counts, the planHash, and the calls when asked. */
export function planLines(plan: FleetPlan, options: { calls: boolean }): string[] {
  const { counts } = plan;
  const lines: string[] = [];
  if (plan.empty) lines.push('No changes: the live fleet is what the document says.');
  else {
    for (const change of plan.changes) lines.push(...changeLines(change));
    lines.push(
      `Plan: ${counts.create} to create, ${counts.update} to update, ${counts.delete} to delete${
        counts.blocked ? `, ${counts.blocked} BLOCKED` : ''
      }${plan.prune ? '' : ' (without --prune: objects the document leaves out stay)'}.`,
    );
  }
  if (options.calls) {
    lines.push(
      plan.calls.length ? `Calls apply would make (${plan.calls.length}):` : 'Apply would make no call.',
    );
    for (const [index, call] of plan.calls.entries()) {
      const refs = Object.entries(call.refs).map(([field, ref]) => `${field} from ${ref}`);
      lines.push(
        `  ${index + 1}. ${call.method} ${JSON.stringify(call.input)}${refs.length ? ` (${refs.join(', ')})` : ''}`,
      );
    }
  }
  lines.push(`planHash: ${plan.planHash}`);
  return lines;
}

/** PLAN_BLOCKED for a plan that cannot be applied, naming the first blocked change. */
export function blockedFailure(plan: FleetPlan): CliError | undefined {
  const blocked = plan.changes.filter((change) => change.blocked !== null);
  if (blocked.length === 0) return undefined;
  const first = blocked[0]!;
  return new CliError(
    'PLAN_BLOCKED',
    `${blocked.length} change(s) cannot be made; the first: ${first.kind} ${first.key}: ${first.blocked}`,
    { details: { blocked: blocked.length } },
  );
}
