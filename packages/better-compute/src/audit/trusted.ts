/**
 * Checkpoints a reader kept (`--trusted FILE`): what `audit.checkpoint` answered, what an
 * `audit.checkpoint` webhook delivered, or what a witness cosigned. `audit verify` and
 * `audit check-proof` check that the log still extends each of them by an RFC 6962 consistency
 * proof, so a log whose tail was removed or rewritten (and re-signed) fails against a checkpoint
 * kept before; and, with `--witness` and `--min-witnesses`, that enough witnesses cosigned one.
 *
 * The file holds one or more signed notes one after another (blank lines between them allowed),
 * or JSON: a checkpoint object (`{ note, signer, … }`, as the method and the event give it), an
 * `audit.consistency` answer (`{ checkpoint: { note, … } }`), or an array of those or of notes.
 */
import { readFile, stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import { ComputeError } from '@better-compute/core';
import { parseCheckpoint } from './checkpoint.js';
import {
  cosignaturesOf,
  parseWitnessVerifier,
  type Cosignature,
  type WitnessVerifier,
} from './cosignature.js';
import { verifyConsistency, type Hash } from './merkle.js';
import { parseNote, parseVerifierKey, publicKeyPinOf, verifyNote } from './note.js';

/** Kept checkpoints are a few hundred bytes each; a file larger than this is not one. */
const MAX_TRUSTED_BYTES = 4 << 20;
const MAX_TRUSTED = 1000;

export interface TrustedInput {
  note: string;
  /** The verifier key a JSON document named beside the note, if any (its pin is checked). */
  signer?: string | undefined;
}

export interface TrustedCheckpoint {
  origin: string;
  size: number;
  root: Hash;
  rootHash: string;
  /** The root in lower-case hex: how messages name it (base64 would be hidden as a possible secret). */
  rootHex: string;
  note: string;
  /** False when no key with the pin was at hand to check the log's signature (see verify.ts). */
  signatureChecked: boolean;
}

function badFile(message: string, file: string): ComputeError {
  return new ComputeError('INVALID_ARGUMENT', `--trusted ${file}: ${message}`, {
    hint: 'Give the signed checkpoints you kept: the note audit.checkpoint answered or the audit.checkpoint webhook delivered, as text or as that JSON.',
    details: { field: 'trusted' },
  });
}

/** Splits text holding signed notes one after another. */
function splitNotes(text: string): string[] | null {
  const lines = text.split('\n');
  const notes: string[] = [];
  let i = 0;
  for (;;) {
    while (i < lines.length && lines[i] === '') i++;
    if (i >= lines.length) return notes;
    const start = i;
    while (i < lines.length && lines[i] !== '') i++;
    const body = lines.slice(start, i);
    i++;
    const signatures: string[] = [];
    while (i < lines.length && lines[i]!.startsWith('\u2014 ')) signatures.push(lines[i++]!);
    if (signatures.length === 0) return null;
    notes.push(`${body.join('\n')}\n\n${signatures.join('\n')}\n`);
  }
}

function fromJson(value: unknown): TrustedInput[] | null {
  const one = (item: unknown): TrustedInput | null => {
    if (typeof item === 'string') return { note: item };
    if (typeof item !== 'object' || item === null) return null;
    const record = item as Record<string, unknown>;
    if (typeof record.checkpoint === 'object' && record.checkpoint !== null) return one(record.checkpoint);
    // A webhook delivery or an events.list item carries the checkpoint as its `data`.
    if (typeof record.data === 'object' && record.data !== null) return one(record.data);
    if (typeof record.note !== 'string') return null;
    return { note: record.note, signer: typeof record.signer === 'string' ? record.signer : undefined };
  };
  const items = Array.isArray(value) ? value : [value];
  const parsed = items.map(one);
  return parsed.every((item): item is TrustedInput => item !== null) ? parsed : null;
}

/** Reads `--trusted FILE`; INVALID_ARGUMENT when it holds no signed checkpoint. */
export async function readTrustedFile(cwd: string, file: string): Promise<TrustedInput[]> {
  const path = resolve(cwd, file);
  let text: string;
  try {
    if ((await stat(path)).size > MAX_TRUSTED_BYTES) throw badFile('the file is larger than 4 MiB', file);
    text = await readFile(path, 'utf8');
  } catch (error) {
    if (error instanceof ComputeError) throw error;
    const code = (error as NodeJS.ErrnoException).code;
    throw new ComputeError(
      code === 'ENOENT' ? 'NOT_FOUND' : 'INVALID_ARGUMENT',
      `cannot read ${file} (${code})`,
      {
        hint: 'Give the path of the file that holds the checkpoints you kept.',
      },
    );
  }
  let inputs: TrustedInput[] | null;
  const trimmed = text.trimStart();
  if (trimmed.startsWith('{') || trimmed.startsWith('[')) {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      throw badFile('it starts like JSON but is not JSON', file);
    }
    inputs = fromJson(value);
  } else {
    inputs = splitNotes(text)?.map((note) => ({ note })) ?? null;
  }
  if (!inputs || inputs.length === 0) throw badFile('it holds no signed checkpoint', file);
  if (inputs.length > MAX_TRUSTED) throw badFile(`it holds more than ${MAX_TRUSTED} checkpoints`, file);
  return inputs;
}

/**
 * Opens kept checkpoints: each note's body, its origin (the tenant's log), and the log's signature
 * under a key with the pin: `keys` (what the caller already trusts) or the note's own `signer`.
 * A note such a key does not verify is INVALID_ARGUMENT: the file is not what the reader kept.
 */
export function openTrusted(
  inputs: readonly TrustedInput[],
  options: { tenantId: string; pin: string; keys: readonly string[]; file: string },
): TrustedCheckpoint[] {
  const keys = new Map<string, ReturnType<typeof parseVerifierKey>>();
  const addKey = (text: string | undefined) => {
    const key = text ? parseVerifierKey(text) : null;
    if (key && publicKeyPinOf(key.publicKey) === options.pin) keys.set(key.name, key);
  };
  options.keys.forEach(addKey);
  return inputs.map((input, index) => {
    const which = `checkpoint ${index + 1}`;
    addKey(input.signer);
    const parsed = parseNote(input.note);
    if ('error' in parsed) throw badFile(`${which} is not a signed note: ${parsed.error}`, options.file);
    const body = parseCheckpoint(parsed.text);
    if ('error' in body) throw badFile(`${which} is not a checkpoint: ${body.error}`, options.file);
    if (!body.origin.endsWith(`/audit/${options.tenantId}`)) {
      throw badFile(`${which} is of log "${body.origin}", not tenant ${options.tenantId}'s`, options.file);
    }
    const key = keys.get(body.origin);
    if (key) {
      const verdict = verifyNote(input.note, key.name, key.publicKey);
      if (!verdict.ok) {
        throw badFile(
          `${which} (size ${body.size}) is not signed by the audit key: ${verdict.reason}`,
          options.file,
        );
      }
    }
    return {
      origin: body.origin,
      size: body.size,
      root: body.root,
      rootHash: Buffer.from(body.root).toString('base64'),
      rootHex: Buffer.from(body.root).toString('hex'),
      note: input.note,
      signatureChecked: Boolean(key),
    };
  });
}

/** The tree sizes of kept checkpoints, unchecked: what `audit prove --trusted` makes proofs from. */
export function trustedSizes(inputs: readonly TrustedInput[], file: string): number[] {
  return inputs.map((input, index) => {
    const parsed = parseNote(input.note);
    const body = 'error' in parsed ? parsed : parseCheckpoint(parsed.text);
    if ('error' in body) throw badFile(`checkpoint ${index + 1} is not a checkpoint: ${body.error}`, file);
    return body.size;
  });
}

/**
 * Why a kept checkpoint is not an ancestor of the current one (null when it is): larger than the
 * log, or the consistency proof from it does not lead to both roots. `proof` is null when the
 * proof could not be had (check-proof: the file carries none for this size).
 */
export function notAncestor(
  trusted: TrustedCheckpoint,
  current: { size: number; root: Hash },
  proof: readonly Hash[],
): string | null {
  if (trusted.size > current.size) {
    return `it is larger than the log's latest checkpoint (size ${current.size}): the log was shortened`;
  }
  const verdict = verifyConsistency(trusted.size, current.size, proof, trusted.root, current.root);
  return verdict.ok ? null : `the consistency proof to checkpoint ${current.size} fails: ${verdict.reason}`;
}

/** `--witness KEY`: each a witness's verifier key; INVALID_ARGUMENT when one is not. */
export function parseWitnessFlags(values: readonly string[]): WitnessVerifier[] {
  return values.map((value) => {
    const verifier = parseWitnessVerifier(value);
    if (!verifier) {
      throw new ComputeError(
        'INVALID_ARGUMENT',
        `--witness ${JSON.stringify(value.slice(0, 120))} is not a witness verifier key`,
        {
          hint: 'A witness key looks like NAME+1a2b3c4d+base64 (`audit witness keygen` prints it).',
          details: { field: 'witness' },
        },
      );
    }
    return verifier;
  });
}

export interface WitnessReport {
  required: number;
  /** The largest checkpoint with enough valid cosignatures, or null. */
  witnessed: { size: number; rootHash: string; cosignatures: Cosignature[] } | null;
  /** Lines that carry a given witness's name and key id but do not verify. */
  forged: { size: number; witness: string }[];
}

/** Whether `min` of `verifiers` validly cosigned one of the notes (distinct witnesses). */
export function witnessReport(
  notes: readonly { size: number; rootHash: string; note: string }[],
  verifiers: readonly WitnessVerifier[],
  min: number,
): WitnessReport {
  let witnessed: WitnessReport['witnessed'] = null;
  const forged: WitnessReport['forged'] = [];
  for (const checkpoint of notes) {
    const { valid, forged: bad } = cosignaturesOf(checkpoint.note, verifiers);
    for (const witness of bad) forged.push({ size: checkpoint.size, witness });
    if (valid.length >= min && (!witnessed || checkpoint.size > witnessed.size)) {
      witnessed = { size: checkpoint.size, rootHash: checkpoint.rootHash, cosignatures: valid };
    }
  }
  return { required: min, witnessed, forged };
}

/** The refusal when a witness requirement is not met: INVALID_PROOF naming what was found. */
export function witnessRefusal(report: WitnessReport, verifiers: number): ComputeError | null {
  if (report.forged.length > 0) {
    const first = report.forged[0]!;
    return new ComputeError(
      'INVALID_PROOF',
      `checkpoint ${first.size} carries a cosignature by ${first.witness} that does not verify: it was forged or changed`,
      {
        hint: 'Fetch the cosigned checkpoint from the witness again; never trust one whose cosignature fails.',
      },
    );
  }
  if (report.witnessed) return null;
  return new ComputeError(
    'INVALID_PROOF',
    `no checkpoint carries ${report.required} valid cosignature(s) of the ${verifiers} witness key(s) given`,
    {
      hint: 'Pass with --trusted the checkpoints the witnesses cosigned (audit witness cosign prints them), or lower --min-witnesses.',
      details: { required: report.required },
    },
  );
}
