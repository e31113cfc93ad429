/**
 * `--witness` and `--min-witnesses` of `audit verify` and `audit check-proof`: the witnesses'
 * verifier keys and how many must have cosigned a `--trusted` checkpoint. Cosignatures travel on
 * the checkpoints a reader kept (the server stores none), so the witness flags need `--trusted`.
 */
import { ComputeError } from '@better-compute/core';
import type { WitnessVerifier } from '../../../audit/cosignature.js';

export async function witnessesWanted(flags: {
  witness: string[];
  minWitnesses?: number | undefined;
  trusted?: string | undefined;
}): Promise<{ verifiers: WitnessVerifier[]; min: number } | undefined> {
  if (flags.witness.length === 0 && flags.minWitnesses === undefined) return undefined;
  if (flags.witness.length === 0)
    throw new ComputeError('INVALID_ARGUMENT', '--min-witnesses needs the witnesses’ keys', {
      hint: 'Pass each witness’s verifier key with --witness NAME+keyid+base64.',
      details: { field: 'witness' },
    });
  if (!flags.trusted)
    throw new ComputeError(
      'INVALID_ARGUMENT',
      '--witness needs --trusted: the cosignatures are on the checkpoints you kept',
      {
        hint: 'Pass the cosigned checkpoints (what audit witness cosign printed) with --trusted FILE.',
        details: { field: 'trusted' },
      },
    );
  const { parseWitnessFlags } = await import('../../../audit/trusted.js');
  const verifiers = parseWitnessFlags(flags.witness);
  const names = new Set(verifiers.map((v) => `${v.name}+${v.keyId}`));
  const min = flags.minWitnesses ?? 1;
  if (min > names.size)
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `--min-witnesses ${min} is more than the ${names.size} witness key(s) given`,
      {
        hint: 'Give at least as many --witness keys as --min-witnesses asks for.',
        details: { field: 'minWitnesses' },
      },
    );
  return { verifiers, min };
}
