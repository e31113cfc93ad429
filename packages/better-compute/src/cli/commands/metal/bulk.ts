/**
 * `metal bulk --verb VERB (--nodes ID,ID… | --nodes-file FILE) --reason TEXT [--hours N] [--key K]`:
 * metal.bulk, one verb on many machines as one call. The ids are checked and deduplicated here,
 * before anything is sent; the server checks every machine and refuses the whole call, naming each
 * machine refused, before it creates anything. While the destructive-batch quorum is on, power-off
 * and power-reset become one batch, whose reason is --reason (what its approvers read first), and
 * the command says how to approve it; every other verb starts on each machine at once
 * (docs/decisions/metal-bulk.md).
 */
import { CliError } from '../../errors.js';
import { defineCommand } from '../../define.js';
import { defined, keyFlag, withIdempotencyKey } from '../shared.js';
import { readTextFile } from '../files.js';

/** metal.bulk's verbs (core's METAL_BULK_VERBS; the CLI does not load the method table at start). */
const VERBS = [
  'manage',
  'provide',
  'retire',
  'recover',
  'abort',
  'power-on',
  'power-off',
  'power-reset',
  'power-status',
] as const;
/** The most machines one call names (MAX_BULK_MACHINES: what one batch holds). */
const MAX_MACHINES = 500;
/** 500 ids with comments fit in far less; a larger file is a wrong path. */
const MAX_FILE_BYTES = 1024 * 1024;
/** How many bad ids a message names before "and N more". */
const NAMED = 10;

function usage(message: string, field: string): CliError {
  return new CliError('INVALID_ARGUMENT', message, {
    details: { field },
    hint: 'Name the machines with --nodes node_01…,node_02… or --nodes-file FILE (one id a line, # comments); run "better-compute help metal bulk" for the flags.',
  });
}

const listed = (items: readonly string[]) =>
  items.slice(0, NAMED).join(', ') + (items.length > NAMED ? ` and ${items.length - NAMED} more` : '');

/**
 * The ids of --nodes (comma-separated) or of --nodes-file (one a line; blank lines and text after
 * `#` ignored), each checked to be a node id, once each in the order first given.
 */
function machineIdsOf(
  words: readonly string[],
  source: string,
  isNodeId: (value: string) => boolean,
): string[] {
  const malformed = words.filter((word) => !isNodeId(word));
  if (malformed.length)
    throw usage(
      `${source} holds ${malformed.length === 1 ? 'a word that is not a node id' : `${malformed.length} words that are not node ids`} (node_01…): ${listed(malformed.map((word) => JSON.stringify(word.slice(0, 40))))}`,
      'nodes',
    );
  const ids = [...new Set(words)];
  if (ids.length === 0) throw usage(`${source} names no machine`, 'nodes');
  if (ids.length > MAX_MACHINES)
    throw usage(
      `${source} names ${ids.length} machines; one bulk call takes at most ${MAX_MACHINES} (one batch)`,
      'nodes',
    );
  return ids;
}

/** The words of a --nodes-file: one id a line, blank lines and `#` comments dropped. */
function fileWords(text: string): string[] {
  return text
    .split(/\r?\n/)
    .map((line) => line.replace(/#.*$/, '').trim())
    .filter((line) => line !== '');
}

export default defineCommand({
  name: 'metal bulk',
  group: 'Nodes',
  summary:
    'Run one verb on many machines; power-off and power-reset become one batch for the approvers while the quorum is on (metal.bulk)',
  description:
    'The machines come from --nodes (comma-separated) or --nodes-file (one id a line; blank lines and # comments ignored), deduplicated, at most 500. If any machine is unknown or in a state the verb does not allow, nothing is done and the error names each one.',
  target: 'token',
  calls: ['metal.bulk'],
  flags: {
    verb: {
      type: 'string',
      choices: [...VERBS],
      required: true,
      description: 'What to run on each machine',
    },
    nodes: {
      type: 'string',
      description: 'The machines: node ids separated by commas',
      placeholder: 'ID,ID…',
    },
    nodesFile: {
      type: 'string',
      description: 'Read the machines from a file: one node id a line, blank lines and # comments ignored',
      placeholder: 'FILE',
    },
    reason: {
      type: 'string',
      required: true,
      description: 'Why, in one line: what the batch’s approvers read first (up to 500 characters)',
      placeholder: 'TEXT',
    },
    hours: {
      type: 'number',
      integer: true,
      min: 1,
      max: 72,
      description:
        'When it becomes a batch: how long it stays open for approval (the server’s default is 24)',
      placeholder: 'N',
    },
    key: keyFlag,
  },
  examples: [
    'better-compute metal bulk --verb power-off --nodes-file rack12.txt --reason "PDU swap in rack 12"',
    'better-compute metal bulk --verb provide --nodes node_01k…,node_01m… --reason "rack 12 bring-up"',
  ],
  async run(context) {
    const { flags, io, log, api } = context;
    if ((flags.nodes === undefined) === (flags.nodesFile === undefined))
      throw usage('name the machines with one of --nodes or --nodes-file', 'nodes');
    const { isId } = await import('@better-compute/core');
    const isNodeId = (value: string) => isId('node', value);
    const machineIds =
      flags.nodes !== undefined
        ? machineIdsOf(
            flags.nodes
              .split(',')
              .map((word) => word.trim())
              .filter((word) => word !== ''),
            '--nodes',
            isNodeId,
          )
        : machineIdsOf(
            fileWords(await readTextFile(io, flags.nodesFile!, '--nodes-file', MAX_FILE_BYTES)),
            `${flags.nodesFile} (--nodes-file)`,
            isNodeId,
          );
    const client = await api();
    const answer = await withIdempotencyKey(context, flags.key, (idempotencyKey) =>
      client.call(
        'metal.bulk',
        defined({
          verb: flags.verb as (typeof VERBS)[number],
          machineIds,
          reason: flags.reason,
          hours: flags.hours,
          idempotencyKey,
        }),
      ),
    );
    if (answer.batch) {
      const { batch } = answer;
      log(
        `Created batch ${batch.id}: ${batch.size} command(s) on ${answer.machineIds.length} machine(s); ${batch.approvalsNeeded} approval(s) needed before ${batch.notAfter}.`,
      );
      log(`Nothing runs until then. Each approver reviews and signs it with:`);
      log(`  better-compute batch approve --batch ${batch.id} --key <approver key>`);
    } else
      log(
        `Started ${answer.verb} on ${answer.machines.length} machine(s); no approval is needed for it here.`,
      );
    return answer;
  },
});
