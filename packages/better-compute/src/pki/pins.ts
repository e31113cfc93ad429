/**
 * The deployment's record of its pins (compute.pki_pins): written by `serve` the first time it runs
 * with a bundle, moved forward only along the bundle's own signed command-root rotations, and
 * compared with the bundle by `doctor`, so a bundle swapped for another one is noticed.
 */
import { type Kysely, sql } from 'kysely';
import { type PkiBundle, publicKeyPin } from './bundle.js';
import { followRotations } from './rotation.js';

export type PinPurpose = 'command-root' | 'audit';

export async function readRecordedPins(db: Kysely<any>): Promise<Map<PinPurpose, string>> {
  const { rows } = await sql<{ purpose: PinPurpose; pin: string }>`
    select purpose, pin from compute.pki_pins`.execute(db);
  return new Map(rows.map((row) => [row.purpose, row.pin]));
}

/**
 * Whether the bundle's key for `purpose` is the recorded one, or (for the command root) is reached
 * from it through the bundle's rotation statements.
 */
export function pinMatches(bundle: PkiBundle, purpose: PinPurpose, recorded: string): boolean {
  if (purpose === 'audit') return bundle.audit?.pin === recorded;
  if (bundle.commandRoot.pin === recorded) return true;
  const old = bundle.previousCommandRoots.find((key) => key.pin === recorded);
  if (!old) return false;
  try {
    const current = followRotations(old.publicKey, bundle.commandRootRotations, bundle.trustDomain);
    return publicKeyPin(current) === bundle.commandRoot.pin;
  } catch {
    return false;
  }
}

/**
 * Records the bundle's pins where none is recorded, and moves the command root's forward along a
 * verified rotation. Returns the purposes whose recorded pin the bundle does not match (left as
 * they are: `doctor` reports them).
 */
export async function recordPins(db: Kysely<any>, bundle: PkiBundle): Promise<PinPurpose[]> {
  const recorded = await readRecordedPins(db);
  const mismatched: PinPurpose[] = [];
  const current: [PinPurpose, string | undefined][] = [
    ['command-root', bundle.commandRoot.pin],
    ['audit', bundle.audit?.pin],
  ];
  for (const [purpose, pin] of current) {
    if (pin === undefined) continue;
    const before = recorded.get(purpose);
    if (before === undefined) {
      await sql`insert into compute.pki_pins (purpose, pin) values (${purpose}, ${pin})
        on conflict (purpose) do nothing`.execute(db);
    } else if (before !== pin) {
      if (pinMatches(bundle, purpose, before)) {
        await sql`update compute.pki_pins set pin = ${pin}, recorded_at = now()
          where purpose = ${purpose} and pin = ${before}`.execute(db);
      } else {
        mismatched.push(purpose);
      }
    }
  }
  return mismatched;
}
