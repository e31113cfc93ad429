/**
 * Which command root a daemon trusts. It pins one at join (or on its first session) and never takes
 * another on a gateway's word alone: a new root is adopted only when the gateway also shows the
 * signed rotation statements that lead from the pinned root to it (`pki rotate-command-root`).
 */
import { createPublicKey, type KeyObject } from 'node:crypto';
import { followRotations, publicKeyPin, type RotationEntry } from '@better-compute/core/command-root';

export type RootDecision =
  { kind: 'same' } | { kind: 'rotated'; commandRoot: string } | { kind: 'refused'; reason: string };

function publicKeyOf(pem: string): KeyObject | null {
  try {
    return createPublicKey(pem);
  } catch {
    return null;
  }
}

function isRotation(value: unknown): value is RotationEntry {
  if (!value || typeof value !== 'object') return false;
  const entry = value as Record<string, unknown>;
  return ['from', 'to', 'at', 'statement', 'signature'].every(
    (field) => typeof entry[field] === 'string' && (entry[field] as string).length <= 4096,
  );
}

/**
 * Decides on the root a gateway announced, given the pinned one and the rotation statements the
 * gateway sent. The announced key is adopted only when the statements, each signed by the key
 * before it, end exactly at it.
 */
export function decideCommandRoot(
  pinned: string,
  announced: string,
  rotations: unknown,
  trustDomain: unknown,
): RootDecision {
  const pinnedKey = publicKeyOf(pinned);
  const announcedKey = publicKeyOf(announced);
  if (!pinnedKey) return { kind: 'refused', reason: 'the pinned command root is not a public key' };
  if (!announcedKey)
    return { kind: 'refused', reason: 'the gateway announced a command root that is not a public key' };
  const target = publicKeyPin(announcedKey);
  if (publicKeyPin(pinnedKey) === target) return { kind: 'same' };
  const statements = Array.isArray(rotations) ? rotations.slice(0, 256).filter(isRotation) : [];
  if (statements.length === 0)
    return {
      kind: 'refused',
      reason: 'the gateway announces another command root and no rotation statement to it',
    };
  let reached: KeyObject;
  try {
    reached = followRotations(
      pinnedKey,
      statements,
      typeof trustDomain === 'string' ? trustDomain : undefined,
    );
  } catch (error) {
    return { kind: 'refused', reason: (error as Error).message };
  }
  if (publicKeyPin(reached) !== target)
    return {
      kind: 'refused',
      reason: 'the rotation statements do not lead from the pinned command root to the announced one',
    };
  return { kind: 'rotated', commandRoot: announcedKey.export({ type: 'spki', format: 'pem' }).toString() };
}
