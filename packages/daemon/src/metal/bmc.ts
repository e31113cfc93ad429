/**
 * The BMC driver interface: what the control plane asks of a machine's baseboard management
 * controller, whatever protocol it speaks (IPMI over LAN in ipmi.ts, Redfish in redfish.ts), in the
 * spirit of OpenStack Ironic's power and management interfaces.
 *
 * A driver holds its credentials in memory only. They never reach argv, the environment of a child,
 * a file other than a pipe, a log line or an error: every text a BMC or its tool answers passes
 * through `scrubbed` before it is put in a message, and every failure is a BmcError, which is the
 * project's ComputeError with the kind of failure (`details.bmc`) and a hint of what to check.
 */
import { ComputeError, type ErrorCode } from '@better-compute/core';

/** What `power` can be asked: change the power, or read it (`status`). */
export type PowerAction = 'on' | 'off' | 'reset' | 'cycle' | 'soft' | 'status';
export type PowerChange = Exclude<PowerAction, 'status'>;
export type PowerState = 'on' | 'off';
/** The device the machine boots from next: the network (PXE) or its own disk. */
export type BootDevice = 'pxe' | 'disk';

export const POWER_ACTIONS: readonly PowerAction[] = ['on', 'off', 'reset', 'cycle', 'soft', 'status'];
export const BOOT_DEVICES: readonly BootDevice[] = ['pxe', 'disk'];

export interface BootDeviceOptions {
  /** Every later boot (true) or the next one only (false, the default). */
  persistent?: boolean;
}

/** One machine's BMC. Each call is one exchange with the BMC, bounded by the driver's timeout. */
export interface BmcDriver {
  readonly protocol: 'ipmi' | 'redfish';
  /** `status` answers the power state; a change resolves once the BMC has accepted it. */
  power(action: 'status'): Promise<PowerState>;
  power(action: PowerChange): Promise<void>;
  power(action: PowerAction): Promise<PowerState | void>;
  setBootDevice(device: BootDevice, options?: BootDeviceOptions): Promise<void>;
}

/** A BMC account. The password is kept by the driver in memory and sent only to the BMC. */
export interface BmcCredentials {
  username: string;
  password: string;
}

/**
 * Why a BMC call failed:
 *   invalid      the request was malformed before anything was sent (address, user, password)
 *   unreachable  the address does not resolve, or nothing listens there
 *   timeout      the BMC did not answer in time
 *   auth         the BMC refused the credentials
 *   untrusted    the BMC's TLS certificate is not the pinned one (Redfish)
 *   unsupported  the BMC does not offer that action or device
 *   failed       the BMC answered, with an error
 */
export type BmcFailure =
  'invalid' | 'unreachable' | 'timeout' | 'auth' | 'untrusted' | 'unsupported' | 'failed';

/** The ComputeError code each failure travels as (docs/decisions/metal-drivers.md says why). */
export const BMC_ERROR_CODES: Readonly<Record<BmcFailure, ErrorCode>> = {
  invalid: 'INVALID_ARGUMENT',
  unreachable: 'UNAVAILABLE',
  timeout: 'UNAVAILABLE',
  auth: 'INVALID_STATE',
  untrusted: 'INVALID_STATE',
  unsupported: 'UNSUPPORTED',
  failed: 'INVALID_RESPONSE',
};

const HINTS: Readonly<Record<BmcFailure, string>> = {
  invalid: 'Fix the BMC address, user or password as the message says; nothing was sent to the BMC.',
  unreachable:
    "Check the BMC's address and port, and that this machine has a route to the BMC's management network.",
  timeout:
    'Check that the BMC is powered and reachable from this machine (a firewall that drops its port looks the same), then retry.',
  auth: "Check the BMC user and password stored for the machine; the BMC's own user list says which accounts it has.",
  untrusted:
    'The BMC presented a certificate other than the pinned one: if its certificate was replaced on purpose, pin the new CA or fingerprint; otherwise something else answers at its address.',
  unsupported: 'This BMC does not offer it; use another action or device, or another driver for this BMC.',
  failed: "The BMC refused the request; its own words are in the message. Check the BMC's event log.",
};

/** A failure of a BMC call: a ComputeError whose `details.bmc` names the kind of failure. */
export class BmcError extends ComputeError {
  readonly failure: BmcFailure;

  constructor(
    failure: BmcFailure,
    message: string,
    options: { protocol?: 'ipmi' | 'redfish'; address?: string; hint?: string; cause?: unknown } = {},
  ) {
    const details: Record<string, unknown> = { bmc: failure };
    if (options.protocol) details.protocol = options.protocol;
    if (options.address) details.address = options.address;
    super(BMC_ERROR_CODES[failure], message, {
      details,
      hint: options.hint ?? HINTS[failure],
      cause: options.cause,
    });
    this.failure = failure;
  }
}

/**
 * A BMC's own words made fit for a message: the secrets replaced wherever they appear (as they are,
 * and in the forms they travel in), control characters removed, at most `limit` characters.
 */
export function scrubbed(text: string, secrets: readonly string[], limit = 300): string {
  let out = text;
  for (const secret of secrets) {
    if (secret.length < 3) continue; // A very short secret would blank out ordinary words.
    out = out.split(secret).join('[redacted]');
  }
  out = out.replace(/[\u0000-\u001f\u007f-\u009f]+/g, ' ').trim();
  return out.length > limit ? `${out.slice(0, limit)}…` : out;
}

/** The user and password checked the way every driver takes them; never echoed back. */
export function checkCredentials(
  credentials: BmcCredentials,
  limits: { passwordBytes: number; protocol: 'ipmi' | 'redfish' },
): void {
  const { username, password } = credentials;
  const fail = (message: string) => new BmcError('invalid', message, { protocol: limits.protocol });
  if (typeof username !== 'string' || !/^[\x21-\x7e]{1,64}$/.test(username))
    throw fail('the BMC user must be 1 to 64 printable characters without spaces');
  if (typeof password !== 'string' || password.length === 0)
    throw fail('the BMC password is empty; a BMC account without a password is not used');
  if (Buffer.byteLength(password) > limits.passwordBytes)
    throw fail(`the BMC password is longer than the ${limits.passwordBytes} bytes ${limits.protocol} allows`);
  // A line break would end the password early where a tool reads it as a line.
  if (/[\0\r\n]/.test(password)) throw fail('the BMC password holds a NUL or a line break');
}

/** A host name or address a driver may send to: no scheme, path, user part or control character. */
export function checkHost(host: string, protocol: 'ipmi' | 'redfish'): string {
  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  if (!/^[A-Za-z0-9.:-]{1,253}$/.test(bare) || bare.startsWith('-'))
    throw new BmcError(
      'invalid',
      `the BMC address ${JSON.stringify(host.slice(0, 80))} is not a host name or IP address`,
      {
        protocol,
      },
    );
  return bare;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Polls `power('status')` until the machine is in `state`, as Ironic does after a power change;
 * a BMC that accepted a change may take a moment to carry it out.
 */
export async function waitForPowerState(
  driver: BmcDriver,
  state: PowerState,
  timeoutMs: number,
  intervalMs = 250,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: PowerState | undefined;
  for (;;) {
    last = await driver.power('status');
    if (last === state) return;
    if (Date.now() >= deadline) break;
    await sleep(intervalMs);
  }
  throw new BmcError(
    'timeout',
    `the machine is still powered ${last} ${timeoutMs} ms after it was asked to be ${state}`,
    {
      protocol: driver.protocol,
      hint: 'The BMC accepted the change but the machine did not follow; check the BMC event log and the power supply.',
    },
  );
}
