/**
 * The deployment's approver set, from its PKI bundle's approver chain (`pki approvers`): the quorum
 * is on when the chain is not empty, and the set that counts is the chain's last, reached through
 * changes each signed by a threshold of the set before it. The bundle is found as the other
 * deployment keys are (the configuration's `pki`, else the default path) and read again only when
 * the file changes, so a new epoch takes effect without a restart and a broken one is refused.
 */
import { stat } from 'node:fs/promises';
import { ComputeError } from '@better-compute/core';
import { type ApproverChainEntry, type ApproverSet, followApproverChain } from '@better-compute/core/quorum';

export interface ApproverSettings {
  /** The bundle's path (the configuration's `pki`), relative to the working directory. */
  pki?: string | undefined;
}

export interface Quorum {
  /** The bundle's trust domain: every batch and approval names it. */
  trustDomain: string;
  /** The current set: the chain's last. */
  set: ApproverSet;
  /** The chain as the bundle holds it, oldest first: what the gateway sends daemons at welcome. */
  chain: readonly ApproverChainEntry[];
}

export interface ApproverLoader {
  /** The deployment's quorum, or null when it is off (no bundle at the default path, or no chain). */
  current(): Promise<Quorum | null>;
}

const HINT =
  'An operator fixes the bundle’s approver chain with better-compute pki approvers (docs/quorum.md); a chain whose change is not signed by a threshold of the set before it is never used.';

function invalidConfig(message: string, cause?: unknown): ComputeError {
  return new ComputeError('INVALID_CONFIG', message, { hint: HINT, ...(cause ? { cause } : {}) });
}

export function createApproverLoader(settings: ApproverSettings): ApproverLoader {
  let cached: { stamp: string; quorum: Quorum | null } | undefined;

  async function load(path: string): Promise<Quorum | null> {
    const { readPkiBundle } = await import('../../pki/bundle.js');
    let bundle;
    try {
      bundle = await readPkiBundle(path);
    } catch (error) {
      throw invalidConfig(
        'this deployment’s PKI bundle cannot be read, so its approver set is unknown',
        error,
      );
    }
    if (bundle.approvers.length === 0) return null;
    const verdict = followApproverChain(null, bundle.approvers);
    if (!verdict.ok)
      throw invalidConfig(`the PKI bundle’s approver chain does not verify: ${verdict.reason}`);
    if (verdict.set.trustDomain !== bundle.trustDomain)
      throw invalidConfig(
        `the PKI bundle’s approver set is for trust domain ${verdict.set.trustDomain}, the bundle for ${bundle.trustDomain}`,
      );
    return { trustDomain: bundle.trustDomain, set: verdict.set, chain: bundle.approvers };
  }

  return {
    async current() {
      const { resolvePkiPath } = await import('../../pki/bundle.js');
      const path = resolvePkiPath(process.cwd(), settings.pki);
      let stamp: string;
      try {
        const file = await stat(path);
        stamp = `${file.ino}:${file.size}:${file.mtimeMs}`;
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        // No bundle where none was configured: a deployment without one has no quorum.
        if (!settings.pki && (code === 'ENOENT' || code === 'ENOTDIR')) return null;
        throw invalidConfig(
          'this deployment’s PKI bundle cannot be read, so its approver set is unknown',
          error,
        );
      }
      if (cached?.stamp === stamp) return cached.quorum;
      const quorum = await load(path);
      cached = { stamp, quorum };
      return quorum;
    },
  };
}

/** The quorum, or INVALID_STATE when it is off: no batch is made or approved without one. */
export async function requireQuorum(loader: ApproverLoader): Promise<Quorum> {
  const quorum = await loader.current();
  if (!quorum)
    throw new ComputeError(
      'INVALID_STATE',
      'the destructive-batch quorum is off in this deployment: its PKI bundle names no approvers',
      {
        details: { reason: 'quorum-off' },
        hint: 'An operator sets the approver set with better-compute pki approvers (docs/quorum.md), then batches can be created and approved.',
      },
    );
  return quorum;
}
