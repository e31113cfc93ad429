/**
 * Bare-metal machines in the simulator (`sim --metal N`): a site agent that joins with a site token
 * and heartbeats as a real one does, its provisioning network (a `site.pxe` session), N machines
 * enrolled through `compute.handler` with a MAC each, an operator who runs the verbs each machine's
 * `allowed` offers, and the agent itself: it takes its commands as the gateway hands them out
 * (openCommands, markSent), answers `metal.bmc` with the power of the machine it simulates and
 * `metal.boot-entries` with what its network now boots, and relays the deploy ramdisk's report
 * through the gateway's own `recordInspection` when a machine it boots into the ramdisk comes up.
 *
 * Faults (with `faults`), drawn from each machine's own generator in the order of its own commands,
 * so a machine's fate does not hang on how jobs of other machines interleave: a BMC call taken and
 * never answered, a BMC that refuses, a late answer, and a PXE request lost on the way (the ramdisk
 * never reports). Nothing here stands in for the control plane: the step and wait timeouts that
 * end them are the real workflow controller's.
 */
import { ROOT_TENANT } from '@better-compute/core';
import type { MetalCleaning, MetalInventory } from '@better-compute/core/methods';
import type { Kysely } from 'kysely';
import type { ComputeTables } from '../db/tables.js';
import {
  advanceCommand,
  expireCommand,
  type CommandRow,
  markSent,
  openCommands,
  recordNodeSession,
} from '../modules/commands/index.js';
import {
  BOOT_ENTRIES_ENDED_JOB,
  PXE_CAPABILITY,
  pushBootEntriesTo,
  recordCleaning,
  recordInspection,
} from '../modules/metal/index.js';
import { createRandom } from './fleet.js';
import type { SimApi } from './instances.js';
import type { Violation } from './invariants.js';
import { checkMetal, metalHashRows, MetalReplay, metalSummary } from './metal-invariants.js';

/**
 * How often, per machine and step, the operator tries each verb when the machine's `allowed`
 * offers it. Retire is rare, since nothing leaves retired; provide is rare too, since available
 * allows only power and retire until deploy exists, and the other verbs are what the faults need.
 */
const VERB_RATES = {
  manage: 0.2,
  inspect: 0.08,
  provide: 0.006,
  recover: 0.1,
  abort: 0.02,
  power: 0.06,
  retire: 0.0003,
} as const;
type ActorVerb = keyof typeof VERB_RATES;
const POWER_ACTIONS = ['on', 'off', 'status'] as const;

/** Per BMC call, with faults on: never answered, refused, answered late (1 to 3 steps). */
const BMC_UNANSWERED = 0.04;
const BMC_REFUSED = 0.04;
const BMC_LATE = 0.06;
/** Per boot into the ramdisk, with faults on: the PXE request never reaches the agent. */
const PXE_LOST = 0.15;
/** Per cleaning, with faults on: the disk fails the write, and the ramdisk says so. */
const DISK_WRITE_FAILS = 0.2;

/** The refusals a busy site answers; anything else fails the simulation. */
const METAL_REFUSALS = ['INVALID_STATE', 'CONFLICT'];

/** A machine as the simulator knows it: what the control plane was told, and what the BMC would say. */
interface SimMachine {
  name: string;
  id: string;
  mac: string;
  address: string;
  inventory: MetalInventory;
  /** The machine's own power, which its BMC answers with. */
  power: 'on' | 'off';
  /** Counts its boots, so a ramdisk report only lands for the boot that started it. */
  boot: number;
  /** Its own generator: fates drawn in the order of its own commands. */
  random: () => number;
}

/** A command the agent took and has not answered yet; `due` null is one it will never answer. */
interface Taken {
  row: CommandRow;
  due: number | null;
  /** The BMC refuses it when answered. */
  refuse: boolean;
}

export interface MetalSite {
  /** The site agent's node id and hostname, for the state hash's names. */
  agent: { id: string; hostname: string };
  /** The job kinds the site adds to the ones the simulator runs at every step. */
  jobKinds: readonly string[];
  /** One step: the agent heartbeats, answers and relays; then the operator acts. */
  step(step: number, now: Date): Promise<void>;
  /** The metal invariants (metal-invariants.ts), at the full-check cadence. */
  check(step: number, now: Date): Promise<Violation[]>;
  /** The machines for the state hash, by name. */
  hashRows(): Promise<unknown[]>;
  /** What the run came to, for the report's counts. */
  summary(): Promise<Record<string, number>>;
}

const hex = (random: () => number, digits: number) =>
  Array.from({ length: digits }, () => Math.floor(random() * 16).toString(16)).join('');

/** A seeded machine: its MAC, SMBIOS UUID and the hardware its ramdisk will find. */
function seedMachine(index: number, random: () => number): Omit<SimMachine, 'id'> {
  const mac = `52:54:00:5e:${((index >> 8) & 255).toString(16).padStart(2, '0')}:${(index & 255)
    .toString(16)
    .padStart(2, '0')}`;
  const uuid = `${hex(random, 8)}-${hex(random, 4)}-4${hex(random, 3)}-8${hex(random, 3)}-${hex(random, 12)}`;
  const cpus = [32, 64, 128][Math.floor(random() * 3)]!;
  const memoryMiB = [262_144, 524_288, 1_048_576][Math.floor(random() * 3)]!;
  return {
    name: `sim-bm-${String(index).padStart(5, '0')}`,
    mac,
    address: `10.77.${(index >> 8) & 255}.${index & 255}`,
    inventory: {
      systemUuid: uuid,
      cpu: { count: cpus, model: 'AMD EPYC 7543 32-Core Processor' },
      memory: { physicalMiB: memoryMiB, totalKiB: memoryMiB * 1000 },
      disks: [
        {
          name: 'nvme0n1',
          sizeBytes: 3_840_755_982_336,
          model: 'SAMSUNG MZQL23T8',
          serial: `S64H${String(index).padStart(6, '0')}`,
          rotational: false,
        },
      ],
      nics: [{ name: 'eno1', mac }],
    },
    power: random() < 0.5 ? 'on' : 'off',
    boot: 0,
    random,
  };
}

const codeOf = (error: unknown): string | null =>
  error instanceof Error && 'code' in error && typeof error.code === 'string' ? error.code : null;

/** Sets up the site agent, its provisioning network and the machines; answers the site to step. */
export async function setUpMetal(
  api: SimApi,
  db: Kysely<ComputeTables>,
  options: {
    ops: string;
    siteId: string;
    seed: number;
    machines: number;
    faults: boolean;
    stepSeconds: number;
    /** Steps between the agent's heartbeats: the fleet's, so it is never taken for offline. */
    heartbeatEvery: number;
    now: () => Date;
    bump: (key: string) => void;
  },
): Promise<MetalSite> {
  const { ops, bump } = options;
  // Its own generators, so the rest of the run draws the same numbers with or without machines.
  const actor = createRandom(options.seed ^ 0x3e7a_1b0c);
  const pool = await api<{ id: string }>(
    'pools.create',
    { siteId: options.siteId, name: 'sim-site-agents', class: 'gpu', driver: 'sim' },
    ops,
  );
  // The agent joins as `bcd join` with a site token does: pre-approved, a site-agent node.
  const { token } = await api<{ token: string }>(
    'siteTokens.create',
    { poolId: pool.id, preApproved: true },
    ops,
  );
  const hostname = 'sim-site-agent';
  const joined = await api<{ nodeId: string; nodeCredential: string }>('nodes.join', {
    joinToken: token,
    hostname,
    inventory: { cpuCores: 8, memoryGiB: 32, gpus: [] },
  });
  const agentId = joined.nodeId;
  const heartbeat = async (hello: boolean) => {
    await api('nodes.heartbeat', { nodeCredential: joined.nodeCredential });
    // The session the gateway records: a hello says it runs the provisioning network (site.pxe).
    await recordNodeSession(db, {
      nodeId: agentId,
      tenantId: ROOT_TENANT,
      gatewayId: 'gw_sim',
      at: options.now(),
      ...(hello ? { hello: { version: 'sim', capabilities: ['site.agent', PXE_CAPABILITY] } } : {}),
    });
  };
  await heartbeat(true);
  // At a site.pxe hello the gateway queues the site's boot entries for the agent.
  await pushBootEntriesTo(db, agentId, options.now());
  const machines: SimMachine[] = [];
  for (let index = 0; index < options.machines; index++) {
    const seeded = seedMachine(index, createRandom((options.seed ^ 0x6d65_7461) + index * 0x9e37_79b1));
    const redfish = index % 2 === 1;
    const enrolled = await api<{ id: string }>(
      'metal.enroll',
      {
        siteId: options.siteId,
        name: seeded.name,
        bmcDriver: redfish ? 'redfish' : 'ipmi',
        bmcAddress: seeded.address,
        bmcUser: 'admin',
        bmcPassword: `sim-bmc-${index}`,
        ...(redfish ? { bmcTlsFingerprint: hex(seeded.random, 64) } : {}),
        productUuid: seeded.inventory.systemUuid!,
        macs: [seeded.mac],
        idempotencyKey: `sim-metal-${options.seed}-${index}`,
      },
      ops,
    );
    machines.push({ ...seeded, id: enrolled.id });
  }
  const byId = new Map(machines.map((m) => [m.id, m]));

  // The agent's side: what it took, what its network boots, and the ramdisks booting now.
  const taken = new Map<string, Taken>();
  /** What the network boots per MAC: `local-disk`, or the ramdisk's purpose. */
  let entries = new Map<string, string>();
  const ramdisks: { machine: SimMachine; due: number; boot: number; purpose: string }[] = [];

  /** What the ramdisk's metadata erase reports: each disk's three MiB, or the write that failed. */
  function cleaningOf(machine: SimMachine): MetalCleaning {
    const fails = options.faults && machine.random() < DISK_WRITE_FAILS;
    if (fails) bump('metal.fault.disk-write');
    const disk = machine.inventory.disks[0]!;
    return {
      systemUuid: machine.inventory.systemUuid,
      disks: [{ name: disk.name, sizeBytes: disk.sizeBytes, partitions: 2, erasedBytes: 3 * 1024 * 1024 }],
      failed: fails ? `writing the start of ${disk.name} failed` : null,
    };
  }

  /** The machine was powered on: from the network into the ramdisk when its entry says so. */
  function booted(machine: SimMachine, step: number, fromNetwork: boolean) {
    const purpose = entries.get(machine.mac);
    if (!fromNetwork || !purpose || purpose === 'local-disk') return;
    if (options.faults && machine.random() < PXE_LOST) {
      bump('metal.fault.lost-pxe');
      return;
    }
    ramdisks.push({
      machine,
      due: step + 1 + Math.floor(machine.random() * 3),
      boot: machine.boot,
      purpose,
    });
  }

  /** What the BMC does and answers; a change of power is a new boot (or the end of one). */
  function bmcAnswer(machine: SimMachine, payload: Record<string, unknown>, step: number) {
    const action = String(payload.action);
    if (action === 'off' && machine.power === 'on') {
      machine.power = 'off';
      machine.boot += 1;
    } else if (action === 'on' && machine.power === 'off') {
      machine.power = 'on';
      machine.boot += 1;
      booted(machine, step, payload.bootDevice === 'pxe');
    } else if (action === 'reset') {
      machine.power = 'on';
      machine.boot += 1;
      booted(machine, step, false);
    }
    return { powerState: machine.power };
  }

  /** Answers a command the agent took, as bcd reports it (command.result). */
  async function answer(command: Taken, step: number, now: Date) {
    const { row } = command;
    const done = (
      state: 'succeeded' | 'failed',
      result: Record<string, unknown> | null,
      error: string | null = null,
    ) =>
      advanceCommand(db, agentId, row.id, {
        state,
        at: now,
        exitCode: null,
        stdout: '',
        stderr: '',
        result,
        error,
      });
    if (row.kind === 'metal.boot-entries') {
      const wanted = (row.payload.entries as { mac: string; boot: string; purpose?: string }[]) ?? [];
      const next = new Map(wanted.map((e) => [e.mac, e.purpose ?? e.boot]));
      const removed = [...entries.keys()].filter((mac) => !next.has(mac)).length;
      entries = next;
      await done('succeeded', {
        entries: next.size,
        ramdisks: wanted.filter((e) => e.boot === 'ramdisk').length,
        removed,
      });
      return;
    }
    const machine = byId.get(String(row.payload.machineId));
    if (row.kind !== 'metal.bmc' || !machine) {
      await done('failed', null, `the site agent does not run ${row.kind} commands for this payload`);
      return;
    }
    if (command.refuse) {
      await done(
        'failed',
        { bmc: 'failed' },
        `the BMC at ${machine.address} refused power ${String(row.payload.action)}`,
      );
      return;
    }
    await done('succeeded', bmcAnswer(machine, row.payload, step));
  }

  /** A new command: answered now, later, never (unanswered) or refused, from its machine's draws. */
  function take(row: CommandRow, step: number): Taken {
    const machine = row.kind === 'metal.bmc' ? byId.get(String(row.payload.machineId)) : undefined;
    if (!options.faults || !machine) return { row, due: step, refuse: false };
    const roll = machine.random();
    if (roll < BMC_UNANSWERED) {
      bump('metal.fault.unanswered');
      return { row, due: null, refuse: false };
    }
    if (roll < BMC_UNANSWERED + BMC_REFUSED) {
      bump('metal.fault.refused');
      return { row, due: step, refuse: true };
    }
    if (roll < BMC_UNANSWERED + BMC_REFUSED + BMC_LATE) {
      bump('metal.fault.late');
      return { row, due: step + 1 + Math.floor(machine.random() * 3), refuse: false };
    }
    return { row, due: step, refuse: false };
  }

  /** The agent's step, as the gateway and bcd between them would run it. */
  async function serve(step: number, now: Date) {
    const fresh: CommandRow[] = [];
    for (const row of await openCommands(db, [agentId])) {
      if (row.state === 'queued' && new Date(row.expires_at).getTime() <= now.getTime()) {
        // The gateway fails what waited past its expiry rather than send it.
        await expireCommand(db, agentId, row.id, now);
        continue;
      }
      if (row.cancel_requested && row.state !== 'queued') {
        // command.cancel: bcd stops what it runs (a hung BMC call, one whose answer is late) and
        // reports it cancelled, as agent.ts does for the command it holds.
        taken.delete(row.id);
        await advanceCommand(db, agentId, row.id, {
          state: 'cancelled',
          at: now,
          exitCode: null,
          stdout: '',
          stderr: '',
          result: null,
          error: 'cancelled while it ran',
        });
        bump('metal.agent.dropped');
        continue;
      }
      if (!taken.has(row.id)) fresh.push(row);
    }
    // Sent in one statement; one cancelled between the read and the send is dropped unrun.
    const ended = new Set(
      await markSent(
        db,
        fresh.map((row) => row.id),
        now,
      ),
    );
    for (const row of fresh) {
      if (ended.has(row.id)) continue;
      await advanceCommand(db, agentId, row.id, { state: 'running', at: now });
      taken.set(row.id, take(row, step));
    }
    // In the order they were queued (the map keeps it), what is due now.
    for (const [id, command] of taken) {
      if (command.due === null || command.due > step) continue;
      taken.delete(id);
      await answer(command, step, now);
    }
    // The ramdisks that came up: each reports through the agent, for the boot that started it.
    for (const booting of ramdisks.filter((r) => r.due <= step)) {
      ramdisks.splice(ramdisks.indexOf(booting), 1);
      const { machine } = booting;
      if (machine.boot !== booting.boot || machine.power !== 'on') continue;
      const outcome =
        booting.purpose === 'clean'
          ? await recordCleaning(db, agentId, { mac: machine.mac, cleaning: cleaningOf(machine) }, now)
          : await recordInspection(db, agentId, { mac: machine.mac, inventory: machine.inventory }, now);
      bump(`metal.report.${outcome.outcome}`);
    }
  }

  /** The operator: per machine, at most one of the verbs its `allowed` offers, at their rates. */
  async function act(step: number) {
    const listed: { id: string; allowed: string[] }[] = [];
    let cursor: string | null = null;
    do {
      const page: { items: { id: string; allowed: string[] }[]; nextCursor: string | null } = await api(
        'metal.list',
        { siteId: options.siteId, limit: 500, ...(cursor ? { cursor } : {}) },
        ops,
      );
      listed.push(...page.items);
      cursor = page.nextCursor;
    } while (cursor);
    const allowedOf = new Map(listed.map((m) => [m.id, m.allowed]));
    for (const machine of machines) {
      const allowed = allowedOf.get(machine.id) ?? [];
      const offered = (Object.keys(VERB_RATES) as ActorVerb[]).filter((verb) => allowed.includes(verb));
      let roll = actor();
      const verb = offered.find((v) => (roll -= VERB_RATES[v]) < 0);
      if (!verb) continue;
      const reason = `sim step ${step}`;
      try {
        if (verb === 'power') {
          const action = POWER_ACTIONS[Math.floor(actor() * POWER_ACTIONS.length)]!;
          await api('metal.power', { machineId: machine.id, action, reason }, ops);
          bump(`metal.power.${action}`);
        } else {
          await api(`metal.${verb}`, { machineId: machine.id, reason }, ops);
          bump(`metal.${verb}`);
        }
      } catch (error) {
        const code = codeOf(error);
        if (!code || !METAL_REFUSALS.includes(code)) throw error;
        bump(`metal.refused.${code}`);
      }
    }
  }

  const replay = new MetalReplay();
  return {
    agent: { id: agentId, hostname },
    jobKinds: [BOOT_ENTRIES_ENDED_JOB],
    async step(step, now) {
      if (step % options.heartbeatEvery === 0) await heartbeat(false);
      // The agent before the operator: a live agent drops what the controller gave up on within
      // seconds of the cancel, well inside the minute a step stands for.
      await serve(step, now);
      await act(step);
    },
    check: (step, now) => checkMetal(db, step, now, options.stepSeconds * 1000, replay),
    hashRows: () => metalHashRows(db),
    summary: () => metalSummary(db),
  };
}
