/**
 * Durations as the guide writes them: `90s`, `30m`, `4h`, `1d`, `1h30m`, always whole seconds.
 */
import { ComputeError } from './errors.js';

const UNIT_SECONDS = { d: 86_400, h: 3_600, m: 60, s: 1 } as const;
const DURATION = /^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$/;

/** Parses `30m`, `4h`, `1d`, `1h30m` or a bare number of seconds into whole seconds. */
export function parseDuration(text: string, field = 'duration'): number {
  const trimmed = text.trim();
  if (/^\d+$/.test(trimmed)) return checked(Number(trimmed), text, field);
  const match = DURATION.exec(trimmed);
  if (!trimmed || !match) {
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `${field} must be a duration like 30m, 4h or 1d (got "${text}")`,
      {
        details: { field },
      },
    );
  }
  const [, d, h, m, s] = match;
  const seconds =
    Number(d ?? 0) * UNIT_SECONDS.d +
    Number(h ?? 0) * UNIT_SECONDS.h +
    Number(m ?? 0) * UNIT_SECONDS.m +
    Number(s ?? 0);
  return checked(seconds, text, field);
}

function checked(seconds: number, text: string, field: string): number {
  if (!Number.isSafeInteger(seconds) || seconds <= 0) {
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `${field} must be a positive whole number of seconds (got "${text}")`,
      {
        details: { field },
      },
    );
  }
  return seconds;
}

/** Formats whole seconds in the largest units that divide them: 5400 → `1h30m`. */
export function formatDuration(seconds: number): string {
  if (!Number.isSafeInteger(seconds) || seconds < 0) throw new RangeError(`not a duration: ${seconds}`);
  if (seconds === 0) return '0s';
  let rest = seconds;
  let text = '';
  for (const [unit, size] of Object.entries(UNIT_SECONDS)) {
    const count = Math.floor(rest / size);
    if (count > 0) {
      text += `${count}${unit}`;
      rest -= count * size;
    }
  }
  return text;
}
