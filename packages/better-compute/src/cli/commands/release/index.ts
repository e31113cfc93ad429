/**
 * The release tools, offline (target none): `release keygen`, `sign`, `cosign`, `verify` and
 * `sign-pins`. They share the word `release` with `release RSV` (capacity/release.ts), which releases a reservation:
 * the registry matches the longest command name first, so these words reach these tools and any
 * other word is the reservation (program.ts refuses one that is neither).
 */
import type { AnyCommand } from '../../define.js';
import releaseCosign from './cosign.js';
import releaseKeygen from './keygen.js';
import releaseSign from './sign.js';
import releaseSignPins from './sign-pins.js';
import releaseVerify from './verify.js';

export const releaseCommands: readonly AnyCommand[] = [
  releaseKeygen,
  releaseSign,
  releaseCosign,
  releaseVerify,
  releaseSignPins,
] as readonly AnyCommand[];
