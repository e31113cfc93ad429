/**
 * IPMI over LAN through the host's `ipmitool -I lanplus` (IPMI v2.0, RMCP+), as Ironic's ipmitool
 * power and management interfaces do.
 *
 * The password reaches ipmitool in its environment (`-E` reads IPMI_PASSWORD): never in argv, which
 * every user of the machine can read in /proc, and never in a file. A process's environment is
 * readable only by its own user and root (/proc/<pid>/environ is 0400), and ipmitool starts nothing
 * that would inherit it. (A pipe on a spare descriptor with `-f /dev/fd/3` would be better still,
 * but Node's child pipes are socket pairs, which /dev/fd cannot open.) ipmitool runs in a session
 * of its own, so it has no terminal to ask for a password on either.
 *
 * `-C 3` (RAKP-HMAC-SHA1 with AES-CBC-128) by default: without `-C`, ipmitool first asks for the
 * channel's cipher suites, which many BMCs (and OpenIPMI's ipmi_sim) never answer, and every call
 * then waits 10 s. `-v` makes ipmitool say why a session failed (a wrong password and a BMC that
 * does not answer both end in "Unable to establish IPMI v2 / RMCP+ session").
 */
import { spawn } from 'node:child_process';
import {
  BmcError,
  checkCredentials,
  checkHost,
  scrubbed,
  type BmcCredentials,
  type BmcDriver,
  type BootDevice,
  type BootDeviceOptions,
  type PowerAction,
  type PowerState,
} from './bmc.js';

export interface IpmiTarget {
  /** The BMC's host name or address. */
  host: string;
  /** Its RMCP+ port (UDP; 623 by default). */
  port?: number;
  credentials: BmcCredentials;
  /** The IPMI v2 cipher suite: 3 (the default) or 17 (HMAC-SHA256), as the BMC offers. */
  cipherSuite?: 3 | 17;
  /** The session's privilege level; power and boot device need OPERATOR at least. */
  privilege?: 'ADMINISTRATOR' | 'OPERATOR';
  /** The bound on one call, ipmitool's retries included (10 s by default). */
  timeoutMs?: number;
  /** The ipmitool program (`ipmitool` on PATH by default). */
  ipmitool?: string;
}

/** IPMI v2.0 passwords are at most 20 bytes. */
const IPMI_PASSWORD_BYTES = 20;

/** BMC answers Ironic retries on: a busy BMC, not a refusal. */
const TRANSIENT =
  /Node busy|Out of space|Insufficient resources for session|BMC initialization in progress|Timeout/i;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

export class IpmiDriver implements BmcDriver {
  readonly protocol = 'ipmi' as const;
  readonly address: string;
  readonly #host: string;
  readonly #port: number;
  readonly #username: string;
  readonly #password: string;
  readonly #cipherSuite: number;
  readonly #privilege: string;
  readonly #timeoutMs: number;
  readonly #program: string;

  constructor(target: IpmiTarget) {
    this.#host = checkHost(target.host, 'ipmi');
    const port = target.port ?? 623;
    if (!Number.isInteger(port) || port < 1 || port > 65535)
      throw new BmcError('invalid', `the BMC port ${String(port).slice(0, 20)} is not a port number`, {
        protocol: 'ipmi',
      });
    this.#port = port;
    checkCredentials(target.credentials, { passwordBytes: IPMI_PASSWORD_BYTES, protocol: 'ipmi' });
    this.#username = target.credentials.username;
    this.#password = target.credentials.password;
    if (target.cipherSuite !== undefined && target.cipherSuite !== 3 && target.cipherSuite !== 17)
      throw new BmcError('invalid', 'the IPMI cipher suite must be 3 or 17', { protocol: 'ipmi' });
    this.#cipherSuite = target.cipherSuite ?? 3;
    this.#privilege = target.privilege ?? 'ADMINISTRATOR';
    this.#timeoutMs = target.timeoutMs ?? 10_000;
    this.#program = target.ipmitool ?? 'ipmitool';
    this.address = `${this.#host}:${this.#port}`;
  }

  power(action: 'status'): Promise<PowerState>;
  power(action: Exclude<PowerAction, 'status'>): Promise<void>;
  power(action: PowerAction): Promise<PowerState | void>;
  async power(action: PowerAction): Promise<PowerState | void> {
    if (!['on', 'off', 'reset', 'cycle', 'soft', 'status'].includes(action))
      throw new BmcError('invalid', `${String(action).slice(0, 20)} is not a power action`, {
        protocol: 'ipmi',
      });
    const { stdout } = await this.#call(['chassis', 'power', action], `power ${action}`);
    if (action !== 'status') return;
    const state = /Chassis Power is (on|off)/i.exec(stdout)?.[1]?.toLowerCase();
    if (state !== 'on' && state !== 'off')
      throw this.#error(
        'failed',
        `the BMC answered power status with ${JSON.stringify(scrubbed(stdout, [], 120))}`,
      );
    return state;
  }

  async setBootDevice(device: BootDevice, options: BootDeviceOptions = {}): Promise<void> {
    if (device !== 'pxe' && device !== 'disk')
      throw new BmcError('invalid', `${String(device).slice(0, 20)} is not a boot device (pxe or disk)`, {
        protocol: 'ipmi',
      });
    const args = ['chassis', 'bootdev', device];
    if (options.persistent) args.push('options=persistent');
    const { stdout, stderr } = await this.#call(args, `boot device ${device}`);
    // ipmitool reports a refused boot parameter on stderr and may still exit 0.
    if (!/Set Boot Device to/i.test(stdout)) throw this.#classify(stderr || stdout, `boot device ${device}`);
  }

  /** Runs one ipmitool command, retrying once on a busy BMC while time is left. */
  async #call(command: string[], what: string): Promise<{ stdout: string; stderr: string }> {
    const deadline = Date.now() + this.#timeoutMs;
    for (let attempt = 0; ; attempt += 1) {
      const run = await this.#run(command, deadline - Date.now());
      if (run.timedOut)
        throw this.#error(
          'timeout',
          `the BMC at ${this.address} did not answer ${what} within ${this.#timeoutMs} ms`,
        );
      if (run.code === 0 && !/Unable to establish/i.test(run.stderr))
        return { stdout: run.stdout, stderr: run.stderr };
      const error = this.#classify(run.stderr || run.stdout, what);
      if (
        attempt === 0 &&
        error.failure === 'failed' &&
        TRANSIENT.test(run.stderr) &&
        deadline - Date.now() > 1500
      ) {
        await new Promise((resolve) => setTimeout(resolve, 1000));
        continue;
      }
      throw error;
    }
  }

  #run(command: string[], budgetMs: number): Promise<Run> {
    // ipmitool's own retries (-N seconds, -R attempts) end before the hard bound below in the usual case.
    const args = [
      '-I', 'lanplus', '-C', String(this.#cipherSuite), '-L', this.#privilege,
      '-H', this.#host, '-p', String(this.#port), '-U', this.#username,
      '-N', '1', '-R', '2', '-v', '-E',
      ...command,
    ]; // prettier-ignore
    return new Promise((resolve) => {
      let child;
      try {
        child = spawn(this.#program, args, {
          stdio: ['ignore', 'pipe', 'pipe'],
          env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C', IPMI_PASSWORD: this.#password },
          // A session of its own: no controlling terminal to prompt for a password on.
          detached: true,
        });
      } catch (error) {
        resolve({ code: 127, stdout: '', stderr: (error as Error).message, timedOut: false });
        return;
      }
      let stdout = '';
      let stderr = '';
      let timedOut = false;
      child
        .stdout!.setEncoding('utf8')
        .on('data', (chunk: string) => (stdout = (stdout + chunk).slice(-16_000)));
      child
        .stderr!.setEncoding('utf8')
        .on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-16_000)));
      const timer = setTimeout(
        () => {
          timedOut = true;
          child.kill('SIGKILL');
        },
        Math.max(budgetMs, 1),
      );
      child.on('error', (error) => {
        clearTimeout(timer);
        const missing = (error as NodeJS.ErrnoException).code === 'ENOENT';
        resolve({
          code: 127,
          stdout,
          stderr: missing ? `${this.#program} is not installed` : error.message,
          timedOut: false,
        });
      });
      child.on('close', (code) => {
        clearTimeout(timer);
        resolve({ code, stdout, stderr, timedOut });
      });
    });
  }

  /** The failure ipmitool's words describe. */
  #classify(output: string, what: string): BmcError {
    const said = (text: string) => scrubbed(text, [this.#password]);
    if (/is not installed/.test(output))
      return this.#error('unsupported', `${this.#program} is not installed on this machine`, {
        hint: 'Install ipmitool (Debian package ipmitool) on the machine that drives the BMC.',
      });
    if (/Address lookup for .* failed|Could not open socket/i.test(output))
      return this.#error(
        'unreachable',
        `the BMC address ${this.#host} does not resolve or cannot be reached`,
      );
    if (
      /RAKP 2 HMAC is invalid|unauthorized name|RAKP \d message indicates an error|Invalid user name/i.test(
        output,
      )
    )
      return this.#error('auth', `the BMC at ${this.address} refused the user or password`);
    if (/Insufficient privilege level/i.test(output) && /Unable to establish/i.test(output))
      return this.#error(
        'auth',
        `the BMC account has less than the ${this.#privilege} privilege ${what} needs`,
      );
    if (
      /invalid authentication algorithm|no matching cipher suite|invalid integrity algorithm|invalid confidentiality algorithm/i.test(
        output,
      )
    )
      return this.#error(
        'unsupported',
        `the BMC at ${this.address} does not offer IPMI cipher suite ${this.#cipherSuite}`,
        {
          hint: 'Choose the cipher suite the BMC offers (3 or 17); suite 0 is never used.',
        },
      );
    if (/Get Auth Capabilities error|No response|Unable to establish/i.test(output))
      return this.#error('timeout', `the BMC at ${this.address} did not answer ${what}`);
    if (/Invalid data field in request|Invalid command|not supported|Parameter not supported/i.test(output))
      return this.#error('unsupported', `the BMC does not support ${what}: ${said(lastLines(output))}`);
    return this.#error('failed', `the BMC refused ${what}: ${said(lastLines(output)) || 'no reason given'}`);
  }

  #error(
    failure: ConstructorParameters<typeof BmcError>[0],
    message: string,
    extra: { hint?: string } = {},
  ): BmcError {
    return new BmcError(failure, message, { protocol: 'ipmi', address: this.address, ...extra });
  }
}

/** The last meaningful lines of ipmitool's output (its -v chatter about the registry left out). */
function lastLines(output: string): string {
  return output
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line && !/^Loading IANA|^Running Get|^Discovered IPMB/.test(line))
    .slice(-2)
    .join('; ');
}

/** An IPMI-over-LAN driver for one BMC. */
export function createIpmiDriver(target: IpmiTarget): IpmiDriver {
  return new IpmiDriver(target);
}
