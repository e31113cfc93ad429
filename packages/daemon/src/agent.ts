/**
 * `bcd run`: one session to the gateway, kept up. It says `hello` (version, capabilities,
 * inventory), heartbeats at the interval the server gives, reports inventory changes as they
 * happen, and runs the commands it is sent one at a time, in the order they came, each at most
 * once. A lost session reconnects with jittered exponential backoff. On stop (SIGTERM) it lets the
 * running command finish for a grace period, then stops it and hands it back as failed. With
 * `ephemeral` (what `dev --node` runs) its VMs and sandboxes do not outlive it: it stops them and
 * removes all they made on the machine when it stops, and sweeps what a killed run left when it
 * starts (runtimes/teardown.ts).
 */
import { watchFile, unwatchFile } from 'node:fs';
import { backoffDelay, jittered } from '@better-compute/core';
import { runBmcCommand } from './bmc-command.js';
import WebSocket from 'ws';
import { followWelcomeApprovers, pinnedApproverSet, quorumRefusal } from './approvers.js';
import { isDestructiveKind, needsQuorum } from '@better-compute/core/quorum';
import { followWelcomeReleasePins, followWelcomeReleasePinStatements } from './release-pins.js';
import {
  createPieceFetcher,
  healthCheck,
  installUpdate,
  runningBundle,
  settleUpdate,
  updateInProgress,
} from './update.js';
import { acceptCertificate, certificateDue, certificateRequest, tlsOptionsFor } from './certificate.js';
import { decideCommandRoot } from './command-root.js';
import { type CommandEnvelope, refusal, runPowerScript, runScript, type RunningScript } from './commands.js';
import { safe, sessionUrl } from './http.js';
import { applySshTrust, sshTrustDir } from './ssh-trust.js';
import { type MachineInventory, readMachineInventory } from './inventory.js';
import { isRuntimeCommandKind, isSandboxCommandKind, Runtimes } from './runtimes/index.js';
import { runtimeDirFor } from './runtimes/runtime-dir.js';
import { sweep } from './runtimes/teardown.js';
import {
  applyBootEntries,
  type SiteProvisioningOptions,
  startSiteProvisioning,
} from './metal/site-provisioning.js';
import { type CommandOutcome, outcomeOf, type StateDir } from './state.js';
import { createStreamMux } from './streams/mux.js';
import { registerInstanceTargets, registerSandboxTargets } from './streams/instance-targets.js';
import { loadPty, registerNodeConsole } from './streams/node-console.js';

import { DAEMON_VERSION } from './version.js';

import { capabilities } from './capabilities.js';

export { capabilities, DAEMON_VERSION };

export interface AgentOptions {
  state: StateDir;
  scriptsDir: string;
  gpuInventoryFile?: string | undefined;
  /** How often /proc and /sys are read again for changes (the inventory file is watched as well). */
  inventoryIntervalMs?: number;
  /** How long a running command may finish after a stop before it is handed back. */
  stopGraceMs?: number;
  /** The private IPv4 range instances' networks are carved from (a /29 each). */
  instanceRange?: string | undefined;
  log: (line: string) => void;
  signal: AbortSignal;
  /** Gateway URLs to try first (repeatable --url); then the join URL, then those the last welcome listed. */
  urls?: string[] | undefined;
  /** Where the VMs' sockets go (runtime-dir.ts); from the state directory when not given. */
  runtimeDir?: string | undefined;
  /** Where `ssh.trust` writes the break-glass files sshd reads (ssh-trust.ts); BCD_SSH_DIR or /etc/ssh/bcd when not given. */
  sshDir?: string | undefined;
  /** VMs and sandboxes stop with the daemon, and a start sweeps what a killed run left. */
  ephemeral?: boolean | undefined;
  provisioning?: SiteProvisioningOptions | undefined;
}

/** How long a guest has to power off by its ACPI button when a daemon stops with its VMs. */
const EPHEMERAL_VM_GRACE_MS = 10_000;

/** The session URLs in the order they are tried; a failed or lost session moves to the next. */
export function gatewayUrls(state: StateDir, given: string[] = []): string[] {
  const identity = state.identity();
  const all = [...given, ...(identity ? [identity.url] : []), ...state.gateways()];
  const urls: string[] = [];
  for (const url of all) {
    try {
      const session = sessionUrl(url);
      if (!urls.includes(session)) urls.push(session);
    } catch {
      // A URL that is not one (from a welcome, say) is skipped.
    }
  }
  return urls;
}

/**
 * Runs the session until `signal` stops it ('stopped'), or until the daemon installed an update or
 * rolled one back and must be started again by its supervisor ('restart').
 */
export async function runAgent(options: AgentOptions): Promise<'stopped' | 'restart'> {
  const { state, log, signal } = options;
  const identity = state.identity();
  if (!identity) throw new Error(`no node has joined from ${state.dir}; run bcd join first`);
  const nodeId = identity.nodeId;
  let urls = gatewayUrls(state, options.urls);
  let urlIndex = 0;
  // The console target needs node-pty's binary; without it the node does not claim `pty`.
  const ptyLoaded = await loadPty();
  if (ptyLoaded) registerNodeConsole();
  const streams = createStreamMux({
    sendJson: (message) => send(message),
    sendBinary: (frame) => {
      if (socket?.readyState === WebSocket.OPEN) socket.send(frame, { binary: true });
    },
    log,
  });
  let inventory: MachineInventory = readMachineInventory({ gpuInventoryFile: options.gpuInventoryFile });
  let socket: WebSocket | null = null;
  let heartbeatTimer: NodeJS.Timeout | undefined;
  let failures = 0;
  let certificatesOffered = false;
  /** Set when a gateway refused the certificate presented (a CA since retired): the next try goes without it, and asks for a new one. */
  let certificateRefused = false;
  let commandsRun = 0;
  const queue: { command: CommandEnvelope; signature: string }[] = [];
  let current: { id: string; running: RunningScript | null } | null = null;
  let stopping = false;
  const status = {
    pid: process.pid,
    connected: false,
    since: new Date().toISOString(),
    lastHeartbeatAt: null as string | null,
    nodeState: null as string | null,
  };
  const isSiteAgent = () => state.identity()?.role === 'site-agent';
  const saveStatus = () => state.saveStatus({ ...status, commandsRun });

  const send = (message: Record<string, unknown>): boolean => {
    if (socket?.readyState !== WebSocket.OPEN) return false;
    socket.send(JSON.stringify(message));
    return true;
  };
  // Before any timer: a provisioning network that cannot start stops the daemon with nothing left running.
  const pxe = await startSiteProvisioning(options.provisioning, { siteAgent: isSiteAgent(), send, log });
  // A self-update's build comes over the session; once installed, the daemon stops to restart.
  const pieces = createPieceFetcher(send);
  let restartAsked = false;
  let askRestart: () => void = () => {
    restartAsked = true;
  };

  /** Re-reads the machine; sends the new inventory at once when it changed. */
  const checkInventory = () => {
    let next: MachineInventory;
    try {
      next = readMachineInventory({ gpuInventoryFile: options.gpuInventoryFile });
    } catch (error) {
      log(`bcd: reading the inventory failed: ${(error as Error).message}`);
      return;
    }
    if (JSON.stringify(next) === JSON.stringify(inventory)) return;
    inventory = next;
    log('bcd: the inventory changed; reporting it');
    send({ t: 'heartbeat', inventory: inventory.inventory, hardware: inventory.hardware });
  };
  const inventoryTimer = setInterval(checkInventory, options.inventoryIntervalMs ?? 10_000);
  if (options.gpuInventoryFile) watchFile(options.gpuInventoryFile, { interval: 500 }, checkInventory);

  const runtimeDir = options.runtimeDir ?? runtimeDirFor(state.dir);
  if (options.ephemeral) {
    // What a run killed before it could stop its workloads left: gone before anything starts.
    await sweep({
      stateDir: state.dir,
      runtimeDir,
      log,
      graceMs: EPHEMERAL_VM_GRACE_MS,
      instanceRange: options.instanceRange,
      removeTable: false,
    }).catch((error: Error) => log(`bcd: sweeping what the last run left failed: ${safe(error.message)}`));
  }
  // A VM that stops unasked is told to the control plane until it acknowledges (`instance.exited.ack`).
  const runtimes = new Runtimes(
    state.dir,
    log,
    (exit) => send({ t: 'instance.exited', ...exit }),
    options.instanceRange,
    runtimeDir,
  );
  registerInstanceTargets(runtimes.qemu);
  registerSandboxTargets(runtimes.sandboxes);
  const report = (id: string, outcome: CommandOutcome) => send({ t: 'command.result', id, ...outcome });

  /**
   * The commands that passed the quorum check as they arrived, until they run: metal.bmc is told
   * so, and refuses power off and reset without it (a second guard beside the check on arrival).
   */
  const approved = new Set<string>();
  /** Whether this node pinned an approver set; an unreadable one counts as pinned (refuse, never run). */
  const quorumPinned = () => {
    try {
      return pinnedApproverSet(state) !== null;
    } catch {
      return true;
    }
  };

  async function execute(command: CommandEnvelope): Promise<CommandOutcome> {
    if (command.kind === 'inventory.refresh') {
      inventory = readMachineInventory({ gpuInventoryFile: options.gpuInventoryFile });
      send({ t: 'heartbeat', inventory: inventory.inventory, hardware: inventory.hardware });
      const { cpuCores, memoryGiB, gpus } = inventory.inventory;
      return {
        state: 'succeeded',
        exitCode: 0,
        stdout: '',
        stderr: '',
        result: {
          cpuCores,
          memoryGiB,
          gpus: gpus.length,
          disks: inventory.hardware.disks.length,
          nics: inventory.hardware.nics.length,
        },
        error: null,
      };
    }
    if (command.kind === 'ssh.trust')
      return applySshTrust(options.sshDir ?? sshTrustDir(), command.nodeId, command.payload);
    if (command.kind === 'health.check') return healthCheck(state, options.scriptsDir);
    if (command.kind === 'metal.boot-entries') return applyBootEntries(pxe, command.payload);
    if (command.kind === 'metal.bmc')
      return runBmcCommand(command.payload, {
        siteAgent: isSiteAgent(),
        quorumPinned: quorumPinned(),
        approved: approved.delete(command.id),
      });
    const running =
      isRuntimeCommandKind(command.kind) || isSandboxCommandKind(command.kind)
        ? runtimes.run(command.kind, command.payload)
        : command.kind === 'metal.power'
          ? runPowerScript(options.scriptsDir, command.payload.action)
          : runScript(options.scriptsDir, command.payload.script);
    current = { id: command.id, running };
    return running.outcome;
  }

  /** Runs queued commands one at a time, in arrival order. */
  let draining = false;
  async function drain() {
    if (draining) return;
    draining = true;
    try {
      while (queue.length && !stopping) {
        const { command } = queue.shift()!;
        const seen = state.ledger()[command.id];
        // An update this daemon installed (or returned from) is answered by settleUpdate.
        if (seen && !seen.result && updateInProgress(state, command.id)) continue;
        if (seen) {
          // Run before (by this daemon or before a restart): never again. Report what is known.
          report(
            command.id,
            seen.result ?? {
              state: 'failed',
              exitCode: null,
              stdout: '',
              stderr: '',
              result: null,
              error: 'the daemon stopped while it ran; it was not run again',
            },
          );
          continue;
        }
        state.record(command.id, { state: 'started', at: new Date().toISOString() });
        current = { id: command.id, running: null };
        send({ t: 'command.started', id: command.id });
        log(`bcd: running ${command.id} (${command.kind})`);
        let outcome: CommandOutcome;
        if (command.kind === 'bcd.update') {
          const answer = await installUpdate(command, {
            state,
            log,
            fetchPiece: (version, platform, offset) => pieces.fetch(version, platform, offset),
            bundle: runningBundle(),
            supervised: process.env.BCD_SUPERVISED === '1',
          });
          if ('restart' in answer) {
            // The new version reports this command once it is healthy (settleUpdate).
            current = null;
            askRestart();
            return;
          }
          outcome = answer.outcome;
        } else outcome = await execute(command);
        state.record(command.id, { state: 'done', at: new Date().toISOString(), result: outcome });
        commandsRun += 1;
        current = null;
        report(command.id, outcome);
        saveStatus();
      }
    } finally {
      draining = false;
    }
  }

  function onMessage(text: string) {
    let message: Record<string, unknown>;
    try {
      message = JSON.parse(text) as Record<string, unknown>;
    } catch {
      return;
    }
    if (streams.onMessage(message)) return;
    if (pieces.onMessage(message)) return;
    switch (message.t) {
      case 'ready':
        send({
          t: 'hello',
          version: DAEMON_VERSION,
          capabilities: capabilities({ pty: ptyLoaded, siteAgent: isSiteAgent(), pxe: pxe !== null }),
          inventory: inventory.inventory,
          hardware: inventory.hardware,
        });
        return;
      case 'welcome': {
        failures = 0;
        if (Array.isArray(message.gateways)) {
          const listed = message.gateways
            .filter((url): url is string => typeof url === 'string')
            .slice(0, 32);
          state.saveGateways(listed);
          const current = urls[urlIndex];
          urls = gatewayUrls(state, options.urls);
          urlIndex = Math.max(0, urls.indexOf(current ?? ''));
        }
        certificatesOffered = message.certificates === true;
        if (certificatesOffered && (certificateRefused || certificateDue(state))) {
          certificateRefused = false;
          send(certificateRequest(state, nodeId));
        }
        const root = typeof message.commandRoot === 'string' ? message.commandRoot : null;
        const pinned = state.identity()!;
        if (!pinned.commandRoot && root) {
          // Trust on first use, over a session the node credential authenticated.
          state.saveIdentity({ ...pinned, commandRoot: root });
          log('bcd: pinned the command root');
        } else if (pinned.commandRoot && root && pinned.commandRoot.trim() !== root.trim()) {
          const decision = decideCommandRoot(
            pinned.commandRoot,
            root,
            message.commandRootRotations,
            message.trustDomain,
          );
          if (decision.kind === 'rotated') {
            state.saveIdentity({ ...pinned, commandRoot: decision.commandRoot });
            log('bcd: followed the signed command-root rotation and pinned the new root');
          } else if (decision.kind === 'refused') {
            log(
              `bcd: kept the pinned command root, so commands the gateway signs will be refused: ${safe(decision.reason)}`,
            );
          }
        }
        // After the command root: an approver set is as much the node's own trust as the root is.
        followWelcomeApprovers(state, message, log);
        followWelcomeReleasePins(state, message, log);
        followWelcomeReleasePinStatements(state, message, log);
        // An update recorded before this start is reported (or, failing its health check, undone).
        void settleUpdate(state, options.scriptsDir, log, report)
          .then((restart) => restart && askRestart())
          .catch((error: Error) => log(`bcd: settling the recorded update failed: ${safe(error.message)}`));
        runtimes.sessionStarted();
        status.connected = true;
        status.since = new Date().toISOString();
        status.nodeState = String(message.state ?? '');
        saveStatus();
        log(`bcd: session up as ${pinned.nodeId} (${safe(String(message.state ?? ''))})`);
        const every = Math.min(60, Math.max(1, Number(message.heartbeatIntervalSeconds) || 15)) * 1000;
        clearInterval(heartbeatTimer);
        heartbeatTimer = setInterval(() => send({ t: 'heartbeat' }), every);
        return;
      }
      case 'heartbeat.ack':
        status.lastHeartbeatAt = new Date().toISOString();
        status.nodeState = String(message.state ?? '');
        saveStatus();
        return;
      case 'command': {
        const pinned = state.identity()!;
        const why = refusal(message, {
          nodeId: pinned.nodeId,
          commandRoot: pinned.commandRoot,
          now: new Date(),
        });
        const id = (message.command as { id?: unknown } | undefined)?.id;
        if (why) {
          log(`bcd: refused a command: ${why}`);
          if (typeof id === 'string' && /^cmd_[A-Za-z0-9]{1,64}$/.test(id) && !state.ledger()[id])
            report(id, {
              state: 'failed',
              exitCode: null,
              stdout: '',
              stderr: '',
              result: null,
              error: `refused: ${why}`,
            });
          return;
        }
        if (queue.some((q) => q.command.id === id) || current?.id === id) return;
        const command = message.command as CommandEnvelope;
        // A destructive command runs only with its batch's quorum, whatever the control plane says;
        // one the ledger knows never runs again, so drain answers it from the ledger unchecked.
        // A destructive kind always needs them; a BMC power off or reset (metal.bmc) only once this
        // node pins an approver set: without the quorum the metal module sends it directly, and a
        // node with no set has nothing to check approvals against (bmc-command.ts refuses it then).
        const checked = isDestructiveKind(command.kind) || (needsQuorum(command) && quorumPinned());
        if (checked && !state.ledger()[command.id]) {
          const refused = quorumRefusal(state, command, message.quorum, Date.now());
          if (refused) {
            log(`bcd: refused ${command.id} (${command.kind}): ${refused}`);
            report(command.id, outcomeOf('failed', null, `refused by the node: ${refused}`));
            return;
          }
          approved.add(command.id);
          log(`bcd: ${command.id} (${command.kind}) carries its batch's approvals`);
        }
        queue.push({ command, signature: String(message.signature) });
        void drain();
        return;
      }
      case 'command.cancel': {
        const id = String(message.id);
        if (current && current.id === id) {
          current.running?.stop('cancelled');
          return;
        }
        if (!/^cmd_[A-Za-z0-9]{1,64}$/.test(id)) return;
        const index = queue.findIndex((q) => q.command.id === id);
        if (index >= 0) queue.splice(index, 1);
        approved.delete(id);
        const seen = state.ledger()[id];
        if (seen)
          return report(
            id,
            seen.result ?? {
              state: 'failed',
              exitCode: null,
              stdout: '',
              stderr: '',
              result: null,
              error: 'the daemon stopped while it ran; it was not run again',
            },
          );
        // Recorded before it could run: should it still arrive, the ledger answers for it.
        const outcome: CommandOutcome = {
          state: 'cancelled',
          exitCode: null,
          stdout: '',
          stderr: '',
          result: null,
          error: 'cancelled before it ran',
        };
        state.record(id, { state: 'done', at: new Date().toISOString(), result: outcome });
        report(id, outcome);
        return;
      }
      case 'certificate': {
        const why = acceptCertificate(state, nodeId, message);
        if (why) log(`bcd: kept no certificate: ${safe(why)}`);
        else log(`bcd: holds a node certificate until ${state.certificate()!.notAfter}`);
        return;
      }
      case 'instance.exited.ack':
        if (typeof message.instanceId === 'string')
          void runtimes
            .exitAcknowledged(message.instanceId)
            .catch((error: Error) => log(`bcd: clearing an exit record failed: ${safe(error.message)}`));
        return;
      case 'certificate.refused':
        log(`bcd: the gateway issued no certificate: ${safe(String(message.message))}`);
        return;
      case 'error':
        log(`bcd: the gateway says ${safe(String(message.code))}: ${safe(String(message.message))}`);
        return;
    }
  }

  function connect() {
    if (stopping) return;
    const identityNow = state.identity()!;
    const url = urls[urlIndex % urls.length]!;
    const tls = tlsOptionsFor(state, url);
    if (certificateRefused) delete tls.cert;
    if (!tls.cert) delete tls.key;
    const ws = new WebSocket(url, {
      ...tls,
      headers: { authorization: `Bearer ${identityNow.nodeCredential}` },
      maxPayload: 1 << 20,
      handshakeTimeout: 15_000,
    });
    socket = ws;
    ws.on('message', (data, isBinary) => {
      if (isBinary) streams.onBinary(data as Buffer);
      else onMessage(data.toString());
    });
    ws.on('error', (error) => {
      log(`bcd: session error: ${safe(error.message)}`);
      if (tls.cert && /Unexpected server response: 403/.test(error.message)) {
        certificateRefused = true;
        log(
          'bcd: the gateway refused the node certificate; trying the node credential and asking for a new one',
        );
      }
    });
    ws.on('close', (code) => {
      clearInterval(heartbeatTimer);
      streams.closeAll();
      pieces.closeAll();
      if (socket === ws) socket = null;
      status.connected = false;
      saveStatus();
      if (stopping) return;
      if (code === 4401) log('bcd: the gateway refused the node credential; the node may have been retired');
      // The next gateway in the list: a replica that died hands its daemons to the others.
      if (urls.length > 1) urlIndex = (urlIndex + 1) % urls.length;
      // Full jitter: 0.5 s doubling to 30 s, a random share of it, so a fleet does not return at once.
      failures += 1;
      setTimeout(connect, jittered(backoffDelay(failures, 500, 30_000))).unref();
    });
  }

  connect();
  // Renewal: checked every hour, asked for over the session once two thirds of its life are gone.
  const renewal = setInterval(() => {
    if (certificatesOffered && certificateDue(state)) send(certificateRequest(state, nodeId));
  }, 3_600_000);
  const keepAlive = setInterval(() => {}, 1 << 30);
  await new Promise<void>((resolve) => {
    askRestart = () => {
      restartAsked = true;
      resolve();
    };
    if (signal.aborted || restartAsked) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });
  stopping = true;
  log('bcd: stopping');
  const inFlight = current as { id: string; running: RunningScript | null } | null;
  if (inFlight?.running) {
    const grace = setTimeout(() => inFlight.running?.stop('handed-back'), options.stopGraceMs ?? 30_000);
    await inFlight.running.outcome;
    clearTimeout(grace);
    // Let drain record and report the outcome before the socket closes.
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  if (options.ephemeral) {
    log('bcd: stopping its VMs and sandboxes, and removing what they made on this machine');
    await runtimes
      .stopWorkloads(state.dir, log, EPHEMERAL_VM_GRACE_MS)
      .catch((error: Error) => log(`bcd: stopping its VMs and sandboxes failed: ${safe(error.message)}`));
    // The control plane hears of each VM stopped while the session is up (a clean stop), so the
    // instance reads stopped at once; one not acknowledged in time is told by the next start.
    const told = new Set<string>();
    for (let waited = 0; waited < 2_000; waited += 100) {
      const exits = await runtimes.qemu.exits().catch(() => []);
      if (exits.length === 0 || (socket as WebSocket | null)?.readyState !== WebSocket.OPEN) break;
      for (const exit of exits.filter((e) => !told.has(e.instanceId))) {
        told.add(exit.instanceId);
        send({ t: 'instance.exited', ...exit });
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  runtimes.close();
  await pxe?.stop();
  clearInterval(inventoryTimer);
  clearInterval(heartbeatTimer);
  clearInterval(keepAlive);
  clearInterval(renewal);
  if (options.gpuInventoryFile) unwatchFile(options.gpuInventoryFile);
  (socket as WebSocket | null)?.close(1000, 'the daemon is stopping');
  status.connected = false;
  saveStatus();
  return restartAsked ? 'restart' : 'stopped';
}
