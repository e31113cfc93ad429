/**
 * The metal.bmc-power leaf and the daemon's check of a metal.bmc against it, with real P-256 keys:
 * a site agent's power off runs with a threshold of approvals over a leaf that names the machine,
 * the action, that agent as runner and the BMC it addresses; the same approvals refuse a command
 * for another machine, another action, another agent or another BMC, and an unbound leaf of the
 * kind is refused. Power on and status need no quorum.
 */
import { generateKeyPairSync, createPublicKey } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { CommandEnvelope } from '../src/command-envelope.js';
import { inclusionProof, MerkleLevels } from '../src/merkle.js';
import {
  type ApproverSet,
  type BatchStatement,
  bmcEndpoint,
  checkCommandQuorum,
  commandLeaf,
  commandQuorum,
  encodePublicKey,
  leafProblem,
  needsQuorum,
  readApproverSet,
  type ScopeLeaf,
  scopeLeafHash,
  signApproval,
} from '../src/quorum/index.js';

const keys = [0, 1, 2].map(() => generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey);
const set: ApproverSet = readApproverSet({
  trustDomain: 'compute.example.com',
  epoch: 1,
  threshold: 2,
  approvers: keys.map((key) => ({ publicKey: encodePublicKey(createPublicKey(key)) })),
});
const AGENT = 'node_01k5w0000000000000000000ag';
const OTHER_AGENT = 'node_01k5w0000000000000000000ba';
const MACHINE = 'node_01k5w0000000000000000000m1';
const OTHER_MACHINE = 'node_01k5w0000000000000000000m2';
const BMC = { driver: 'ipmi', address: '10.0.0.9', port: 623, username: 'admin', password: 'pw-9f2c' };
const now = Date.parse('2026-09-25T12:00:00.000Z');

function bmcCommand(change: { nodeId?: string; machineId?: string; action?: string; bmc?: object } = {}) {
  return {
    id: 'cmd_01k5w000000000000000000001',
    nodeId: change.nodeId ?? AGENT,
    kind: 'metal.bmc',
    payload: {
      machineId: change.machineId ?? MACHINE,
      action: change.action ?? 'off',
      bmc: change.bmc ?? BMC,
    },
    expiresAt: '2026-09-25T13:00:00.000Z',
  } as unknown as CommandEnvelope;
}

/** A two-leaf batch (this machine off, another machine reset), approved by `signers` of the set. */
function approvedBatch(signers: number) {
  const leaves: ScopeLeaf[] = [
    {
      subject: MACHINE,
      kind: 'metal.bmc-power',
      payload: { action: 'off', runner: AGENT, bmc: 'ipmi://10.0.0.9:623' },
    },
    {
      subject: OTHER_MACHINE,
      kind: 'metal.bmc-power',
      payload: { action: 'reset', runner: AGENT, bmc: 'ipmi://10.0.0.10' },
    },
  ];
  for (const leaf of leaves) expect(leafProblem(leaf)).toBeNull();
  const levels = new MerkleLevels(leaves.map(scopeLeafHash));
  const statement: BatchStatement = {
    batchId: 'batch_01k5w00000000000000000000a',
    trustDomain: 'compute.example.com',
    root: levels.root(0, leaves.length),
    size: leaves.length,
    notAfter: now + 3_600_000,
  };
  const approvals = keys.slice(0, signers).map((key) => signApproval(key, statement));
  return (index: number) =>
    commandQuorum(
      statement,
      { index, proof: inclusionProof(levels, index, leaves.length), unbound: false },
      approvals,
    );
}

describe('metal.bmc-power: BMC power of a machine, run by its site agent', () => {
  it('the leaf of a metal.bmc is the machine, with the action, the agent as runner and the BMC', () => {
    expect(commandLeaf(bmcCommand(), false)).toEqual({
      subject: MACHINE,
      kind: 'metal.bmc-power',
      payload: { action: 'off', runner: AGENT, bmc: 'ipmi://10.0.0.9:623' },
    });
    // The password and user are never part of what approvers sign.
    expect(bmcEndpoint(BMC)).not.toContain('pw-9f2c');
    expect(bmcEndpoint({ driver: 'redfish', address: 'bmc.r12', port: null, tlsFingerprint: 'AB:CD' })).toBe(
      'redfish://bmc.r12#sha256=AB:CD',
    );
  });

  it('power off and reset need a quorum; on and status do not', () => {
    expect(needsQuorum(bmcCommand())).toBe(true);
    expect(needsQuorum(bmcCommand({ action: 'reset' }))).toBe(true);
    expect(needsQuorum(bmcCommand({ action: 'on' }))).toBe(false);
    expect(needsQuorum(bmcCommand({ action: 'status' }))).toBe(false);
    expect(checkCommandQuorum(set, bmcCommand({ action: 'on' }), approvedBatch(2)(0), now).refusal).toBe(
      'metal.bmc is not a destructive kind',
    );
  });

  it('leaves that do not bind the machine, action and runner are refused', () => {
    const leaf = {
      subject: MACHINE,
      kind: 'metal.bmc-power',
      payload: { action: 'off', runner: AGENT, bmc: 'ipmi://x' },
    };
    expect(leafProblem({ ...leaf, payload: null })).toBe(
      'a metal.bmc-power leaf must bind its payload; null is refused for this kind',
    );
    expect(leafProblem({ ...leaf, payload: { ...leaf.payload, runner: 'agent-7' } })).toBe(
      '"runner" of metal.bmc-power must be a node id',
    );
    expect(leafProblem({ ...leaf, payload: { ...leaf.payload, action: 'on' } })).toBe(
      '"action" of metal.bmc-power must be one of off, reset',
    );
    expect(leafProblem({ ...leaf, payload: { action: 'off', runner: AGENT } })).toBe(
      'metal.bmc-power needs the payload field "bmc"',
    );
  });

  it('a threshold of approvals runs the approved off on the named agent', () => {
    const quorum = approvedBatch(2);
    expect(checkCommandQuorum(set, bmcCommand(), quorum(0), now).refusal).toBeNull();
    expect(
      checkCommandQuorum(
        set,
        bmcCommand({
          machineId: OTHER_MACHINE,
          action: 'reset',
          bmc: { driver: 'ipmi', address: '10.0.0.10' },
        }),
        quorum(1),
        now,
      ).refusal,
    ).toBeNull();
  });

  it('the same approvals refuse another machine, action, agent or BMC, and too few approvals', () => {
    const quorum = approvedBatch(2)(0);
    const refused = (command: CommandEnvelope) => checkCommandQuorum(set, command, quorum, now).refusal;
    for (const command of [
      bmcCommand({ machineId: OTHER_MACHINE }),
      bmcCommand({ action: 'reset' }),
      bmcCommand({ nodeId: OTHER_AGENT }),
      bmcCommand({ bmc: { ...BMC, address: '10.0.0.10' } }),
    ])
      expect(refused(command)).toMatch(
        /^the command is not in batch batch_01k5w00000000000000000000a's scope/,
      );
    expect(checkCommandQuorum(set, bmcCommand(), approvedBatch(1)(0), now).refusal).toBe(
      'batch batch_01k5w00000000000000000000a has 1 valid approval(s) of the 2 the pinned approver set (epoch 1) needs',
    );
    expect(checkCommandQuorum(set, bmcCommand(), { ...quorum, unbound: true }, now).refusal).toBe(
      'the command is not a leaf a batch can hold: a metal.bmc-power leaf must bind its payload; null is refused for this kind',
    );
  });
});
