/**
 * `audit witness cosign`: an independent party's witness. It keeps, per log (origin), the last
 * checkpoint it cosigned in its state directory, and cosigns a new one only when the log's signature
 * verifies under the audit key's pin and an RFC 6962 consistency proof shows the one it holds is a
 * prefix of the new one. A smaller checkpoint, or one of the same size with another root, or a proof
 * that fails, is AUDIT_TAMPERED and changes nothing: the witness's state only ever moves forward,
 * which is what makes a log that was shortened or rewritten unable to get a cosignature again.
 * (c2sp.org/tlog-witness keeps the same state and makes the same check; this witness is fed by its
 * operator, not by the log's push.)
 */
import { createHash } from 'node:crypto';
import { chmod, mkdir, readFile, rename, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ComputeError } from '@better-compute/core';
import { parseCheckpoint, type Checkpoint } from './checkpoint.js';
import { cosignNote, type WitnessKey } from './cosignature.js';
import { verifyConsistency } from './merkle.js';
import { parseVerifierKey, publicKeyPinOf, verifyNote } from './note.js';

/** What the witness is given: a checkpoint as `audit.checkpoint` answers it, and maybe a proof to it. */
export interface WitnessInput {
  checkpoint: { note: string; signer: string };
  consistency?: { fromSize: number; proof: string[] } | undefined;
}

interface WitnessState {
  origin: string;
  size: number;
  rootHash: string;
  /** The cosigned note, as it was printed. */
  note: string;
}

export interface CosignResult {
  origin: string;
  size: number;
  rootHash: string;
  /** The size of the checkpoint this witness held before (0: it saw this log for the first time). */
  previousSize: number;
  witness: string;
  timestamp: number;
  /** The checkpoint with the witness's cosignature line added. */
  note: string;
}

const BASE64_HASH = /^[A-Za-z0-9+/]{43}=$/;

function refuse(message: string, hint: string): ComputeError {
  return new ComputeError('INVALID_ARGUMENT', message, { hint });
}

/** Parses what `--checkpoint FILE` holds: an `audit.checkpoint` answer or an `audit.consistency` one. */
export function witnessInputOf(value: unknown): WitnessInput {
  const record = (typeof value === 'object' && value !== null ? value : {}) as Record<string, unknown>;
  const inner = (
    typeof record.checkpoint === 'object' && record.checkpoint !== null
      ? record.checkpoint
      : typeof record.data === 'object' && record.data !== null
        ? record.data
        : record
  ) as Record<string, unknown>;
  if (typeof inner.note !== 'string' || typeof inner.signer !== 'string') {
    throw refuse(
      'the checkpoint file is not what audit.checkpoint or audit.consistency answers (no note and signer)',
      'Save the answer of `better-compute api audit.checkpoint tenantId=T` (or audit.consistency) to the file, or use --url and --tenant.',
    );
  }
  const input: WitnessInput = { checkpoint: { note: inner.note, signer: inner.signer } };
  if (record.proof !== undefined || record.fromSize !== undefined) {
    const proof = record.proof;
    if (
      typeof record.fromSize !== 'number' ||
      !Number.isSafeInteger(record.fromSize) ||
      !Array.isArray(proof) ||
      proof.some((hash) => typeof hash !== 'string' || !BASE64_HASH.test(hash))
    ) {
      throw refuse(
        'the consistency proof in the checkpoint file is malformed',
        'Give the answer of audit.consistency unchanged.',
      );
    }
    input.consistency = { fromSize: record.fromSize, proof: proof as string[] };
  }
  return input;
}

/** The log's checkpoint, its signature checked under a key with the pin. */
export function openLogCheckpoint(
  input: WitnessInput['checkpoint'],
  pin: string,
  tenantId?: string,
): Checkpoint {
  const key = parseVerifierKey(input.signer);
  if (!key || publicKeyPinOf(key.publicKey) !== pin) {
    throw new ComputeError(
      'AUDIT_KEY_MISSING',
      `the checkpoint's signer is not the audit key with pin ${pin}`,
      {
        hint: 'Witness the log whose audit key pin you were given (--pin or BETTER_COMPUTE_AUDIT_PIN).',
      },
    );
  }
  const verdict = verifyNote(input.note, key.name, key.publicKey);
  if (!verdict.ok) {
    throw new ComputeError('INVALID_PROOF', `the checkpoint's signature does not verify: ${verdict.reason}`, {
      hint: 'Fetch the checkpoint again; a witness cosigns only what the log signed.',
    });
  }
  const body = parseCheckpoint(verdict.text);
  if ('error' in body) throw new ComputeError('INVALID_PROOF', `the checkpoint is malformed: ${body.error}`);
  if (body.origin !== key.name || (tenantId !== undefined && !body.origin.endsWith(`/audit/${tenantId}`))) {
    throw new ComputeError(
      'INVALID_PROOF',
      `the checkpoint is of log "${body.origin}", not the one asked for`,
    );
  }
  return body;
}

function stateFile(stateDir: string, origin: string): string {
  return join(stateDir, `${createHash('sha256').update(origin).digest('hex').slice(0, 32)}.json`);
}

/** The checkpoint this witness last cosigned for `origin`, or null. */
export async function lastCosigned(stateDir: string, origin: string): Promise<WitnessState | null> {
  let text: string;
  try {
    text = await readFile(stateFile(stateDir, origin), 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
  const state = JSON.parse(text) as WitnessState;
  if (state.origin !== origin || !Number.isSafeInteger(state.size) || !BASE64_HASH.test(state.rootHash)) {
    throw new ComputeError('INVALID_STATE', `the witness state for ${origin} is damaged`, {
      hint: 'Restore the state directory from its backup; never start a log over, or its history is lost.',
    });
  }
  return state;
}

/** Checks the new checkpoint against the witness's state, cosigns it, and moves the state forward. */
export async function cosignCheckpoint(options: {
  key: WitnessKey;
  stateDir: string;
  pin: string;
  input: WitnessInput;
  now: Date;
  tenantId?: string | undefined;
}): Promise<CosignResult> {
  const { key, stateDir, input } = options;
  const next = openLogCheckpoint(input.checkpoint, options.pin, options.tenantId);
  const rootHash = Buffer.from(next.root).toString('base64');
  const held = await lastCosigned(stateDir, next.origin);
  // Roots in hex in messages: base64 would be hidden as a possible secret.
  const hex = (base64: string) => Buffer.from(base64, 'base64').toString('hex');
  const named =
    held && `the checkpoint of size ${held.size} and root ${hex(held.rootHash)} (hex) this witness cosigned`;
  if (held && next.size < held.size) {
    throw new ComputeError(
      'AUDIT_TAMPERED',
      `${next.origin} presents size ${next.size}, smaller than ${named}: the log was shortened`,
      { hint: 'Do not cosign: keep the state and both checkpoints as evidence.' },
    );
  }
  if (held && next.size === held.size && rootHash !== held.rootHash) {
    throw new ComputeError(
      'AUDIT_TAMPERED',
      `${next.origin} presents another root for size ${next.size} (${hex(rootHash)}, hex) than ${named}: the log was rewritten`,
      { hint: 'Do not cosign: keep the state and both checkpoints as evidence.' },
    );
  }
  if (held && next.size > held.size) {
    if (!input.consistency || input.consistency.fromSize !== held.size) {
      throw refuse(
        `cosigning size ${next.size} needs the consistency proof from size ${held.size}, the last this witness cosigned`,
        `Fetch it with audit.consistency (tenantId, fromSize ${held.size}, toSize ${next.size}), or use --url and --tenant.`,
      );
    }
    const proof = input.consistency.proof.map((hash) => new Uint8Array(Buffer.from(hash, 'base64')));
    const verdict = verifyConsistency(
      held.size,
      next.size,
      proof,
      new Uint8Array(Buffer.from(held.rootHash, 'base64')),
      next.root,
    );
    if (!verdict.ok) {
      throw new ComputeError(
        'AUDIT_TAMPERED',
        `${next.origin} at size ${next.size} does not extend ${named}: ${verdict.reason}`,
        { hint: 'Do not cosign: keep the state and both checkpoints as evidence.' },
      );
    }
  }
  const timestamp = BigInt(Math.floor(options.now.getTime() / 1000));
  const note = cosignNote(input.checkpoint.note, key, timestamp);
  await saveState(stateDir, { origin: next.origin, size: next.size, rootHash, note });
  return {
    origin: next.origin,
    size: next.size,
    rootHash,
    previousSize: held?.size ?? 0,
    witness: key.name,
    timestamp: Number(timestamp),
    note,
  };
}

/** Writes the state whole (a new file renamed over the old), so a crash leaves the old or the new. */
async function saveState(stateDir: string, state: WitnessState): Promise<void> {
  await mkdir(stateDir, { recursive: true, mode: 0o700 });
  if (!(await stat(stateDir)).isDirectory()) {
    throw refuse(`--state ${stateDir} is not a directory`, 'Give the witness its own directory.');
  }
  const path = stateFile(stateDir, state.origin);
  const temporary = `${path}.${process.pid}.tmp`;
  await writeFile(temporary, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
  await chmod(temporary, 0o600);
  await rename(temporary, path);
}
