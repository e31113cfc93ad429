/**
 * The command framework, and the test that ties the commands to the method table (DESIGN section
 * 3): every group.method a command summary names and every method a command calls must exist in
 * @better-compute/core/methods, so a renamed method fails here rather than at a user's first call.
 */
import { describe, expect, it } from 'vitest';
import { methods } from '@better-compute/core/methods';
import {
  builtinCommands,
  CommandRegistry,
  computeCommands,
  createCli,
  defineCommand,
  HELP_GROUPS,
  main,
  runCli,
  type AnyCommand,
  type HostCommandSpec,
} from '../src/cli/index.js';
import { nameFlag } from '../src/cli/define.js';
import { captureIO } from './cli-support.js';

const methodNames = new Set(Object.keys(methods));

describe('the commands and the method table', () => {
  // `group.method` words; parts of file names (better-compute.config.ts) are not method names.
  const named = (text: string) =>
    [...text.matchAll(/(?<![\w.-])([a-z][a-zA-Z]*\.[a-z][a-zA-Z]*)(?![\w.-])/g)].map((m) => m[1]!);

  it.each(builtinCommands.map((c) => [c.name, c] as const))(
    '%s names and calls only methods of the table',
    (_, command) => {
      for (const method of command.calls ?? [])
        expect(methodNames, `${command.name} calls ${method}`).toContain(method);
      const mentioned = named(`${command.summary} ${command.description ?? ''}`);
      for (const method of mentioned)
        expect(methodNames, `${command.name} names ${method}`).toContain(method);
    },
  );

  it('a command summary naming a method that does not exist would fail', () => {
    expect(methodNames).not.toContain('system.versions');
  });

  it('every token command that calls something declares it', () => {
    for (const command of builtinCommands.filter((c) => c.target === 'token'))
      expect(command.calls?.length ?? 0).toBeGreaterThan(0);
  });
});

describe('the registry', () => {
  const command = (overrides: Partial<AnyCommand>): AnyCommand =>
    defineCommand({
      name: 'seed',
      group: 'Project',
      summary: 's',
      target: 'none',
      run: () => undefined,
      ...overrides,
    }) as AnyCommand;

  it('refuses two commands with one name', () => {
    const registry = new CommandRegistry();
    registry.add(command({}));
    expect(() => registry.add(command({}))).toThrow(
      expect.objectContaining({ code: 'INVALID_CONFIG', message: 'two commands are named "seed"' }),
    );
  });

  it('refuses an orphan: a command in a group help does not know', () => {
    expect(() => new CommandRegistry().add(command({ group: 'Nowhere' }))).toThrow(/help group "Nowhere"/);
  });

  it('refuses malformed names, shared flags redefined, and a variadic positional before another', () => {
    const registry = new CommandRegistry();
    expect(() => registry.add(command({ name: '--x' }))).toThrow(/not a command name/);
    expect(() => registry.add(command({ name: 'a  b' }))).toThrow(/not a command name/);
    expect(() =>
      registry.add(command({ target: 'token', flags: { url: { type: 'string', description: 'x' } } })),
    ).toThrow(/shared flag --url/);
    expect(() =>
      registry.add(
        command({
          positionals: [
            { name: 'a', description: 'a', variadic: true },
            { name: 'b', description: 'b' },
          ],
        }),
      ),
    ).toThrow(/only the last positional/);
  });

  it('puts every built-in command in a known group', () => {
    const groups = new Set(HELP_GROUPS.map((g) => g.name));
    for (const c of builtinCommands) expect(groups).toContain(c.group);
  });
});

const id = (prefix: string) => `${prefix}_01k5w${'0'.repeat(21)}`;

describe('flags and positionals', () => {
  const seen: unknown[] = [];
  const probe = defineCommand({
    name: 'probe it',
    group: 'Project',
    summary: 'Show what it parsed',
    target: 'none',
    flags: {
      name: { type: 'string', description: 'a name', default: 'eu' },
      count: { type: 'number', integer: true, min: 1, max: 10, description: 'a count' },
      wait: { type: 'duration', default: '20s', description: 'how long' },
      pool: { type: 'id', kind: 'pool', description: 'a pool' },
      state: { type: 'string', choices: ['active', 'queued'], description: 'a state' },
      types: { type: 'string', repeated: true, description: 'types' },
      verify: { type: 'boolean', default: true, description: 'verify' },
      dryRun: { type: 'boolean', description: 'dry run' },
      reason: { type: 'string', required: true, description: 'why' },
    },
    positionals: [
      { name: 'node', description: 'a node', kind: 'node' },
      { name: 'more', description: 'the rest', variadic: true },
    ],
    run(context) {
      const flags: {
        name: string;
        count: number | undefined;
        wait: number;
        state: 'active' | 'queued' | undefined;
        types: string[];
        verify: boolean;
      } = context.flags;
      seen.push({ flags, args: context.args, rest: context.rest });
      return undefined;
    },
  });
  const cli = createCli({ commands: [probe], projectCommands: false });
  const run = async (argv: string[]) => {
    seen.length = 0;
    await cli.run(argv, captureIO().io);
    return seen[0];
  };

  it('parses every flag type, defaults, --no-x, repeated and comma lists, positionals and the rest after --', async () => {
    const node = id('node');
    expect(
      await run([
        'probe',
        'it',
        node,
        'a',
        'b',
        '--count',
        '3',
        '--wait=4h',
        '--pool',
        id('pool'),
        '--state',
        'queued',
        '--types',
        'node.*,reservation.*',
        '--types',
        'x',
        '--no-verify',
        '--dry-run',
        '--reason',
        'rack 12',
        '--',
        '--not-a-flag',
      ]),
    ).toEqual({
      flags: {
        name: 'eu',
        count: 3,
        wait: 14400,
        pool: id('pool'),
        state: 'queued',
        types: ['node.*', 'reservation.*', 'x'],
        verify: false,
        dryRun: true,
        reason: 'rack 12',
      },
      args: { node, more: ['a', 'b'] },
      rest: ['--not-a-flag'],
    });
  });

  it.each([
    [['--reason', 'r', '--count', 'x'], 'INVALID_ARGUMENT: --count must be a number (got "x")'],
    [['--reason', 'r', '--count', '11'], 'INVALID_ARGUMENT: --count must be at most 10 (got 11)'],
    [['--reason', 'r', '--count', '1.5'], 'INVALID_ARGUMENT: --count must be a whole number (got "1.5")'],
    [
      ['--reason', 'r', '--wait', 'soon'],
      'INVALID_ARGUMENT: --wait must be a duration like 30m, 4h or 1d (got "soon")',
    ],
    [
      ['--reason', 'r', '--pool', id('rsv')],
      `INVALID_ARGUMENT: --pool must be a pool id like pool_01… (got "${id('rsv')}")`,
    ],
    [
      ['--reason', 'r', '--state', 'activ'],
      'INVALID_ARGUMENT: --state must be one of active, queued (got "activ"); did you mean "active"?',
    ],
    [
      ['--reason', 'r', '--stat', 'active'],
      'INVALID_ARGUMENT: unknown flag --stat for "probe it"; did you mean --state?',
    ],
    [
      ['--reason', 'r', '--verfy'],
      'INVALID_ARGUMENT: unknown flag --verfy for "probe it"; did you mean --verify?',
    ],
    [['--reason'], 'INVALID_ARGUMENT: --reason needs a value (STRING)'],
    [[], 'INVALID_ARGUMENT: missing --reason (STRING)'],
    [
      ['--reason', 'r', id('inst')],
      `INVALID_ARGUMENT: node must be a node id like node_01… (got "${id('inst')}")`,
    ],
    [['--reason', 'r', '--reason', 's'], 'INVALID_ARGUMENT: --reason is given 2 times; give it once'],
    [['--reason', 'r', '-x'], 'INVALID_ARGUMENT: unknown flag -x for "probe it"'],
  ])('%j is a usage mistake: exit 2 before anything runs', async (argv, printed) => {
    const { io, err } = captureIO();
    expect(await main(['probe', 'it', ...argv], cli, io)).toBe(2);
    expect(err[0]).toBe(printed);
    expect(err[1]).toMatch(/^hint: .*"better-compute help probe it"/);
  });

  it('an unknown command exits 2 with INVALID_COMMAND and a suggestion', async () => {
    const { io, err } = captureIO();
    expect(await main(['probe', 'ti'], cli, io)).toBe(2);
    expect(err).toEqual([
      'INVALID_COMMAND: unknown command "probe ti"; did you mean "probe it"?',
      'hint: Run "better-compute probe" for the commands under probe, or "better-compute help" for every command.',
    ]);
    const other = captureIO();
    expect(await main(['zzzzzz'], cli, other.io)).toBe(2);
    expect(other.err[0]).toBe('INVALID_COMMAND: unknown command "zzzzzz"');
  });

  it('--help prints the command’s help instead of running it', async () => {
    const { io, out } = captureIO();
    await cli.run(['probe', 'it', '--help'], io);
    expect(out[0]).toContain('Usage: better-compute probe it [NODE] [MORE…] [flags]');
    expect(out[0]).toContain('--state active|queued');
    expect(out[0]).toContain('--verify');
    expect(out[0]).toContain('default: on; --no-verify turns it off');
    expect(out[0]).toContain('--wait DURATION');
    expect(out[0]).toContain('default: 20s');
  });
});

describe('a create takes its name as --name or as its argument, the same way everywhere (issue 31)', () => {
  const made: unknown[] = [];
  const create = defineCommand({
    name: 'thing create',
    group: 'Project',
    summary: 'Make a thing',
    target: 'none',
    flags: { name: nameFlag('The thing’s name'), size: { type: 'number', description: 'its size' } },
    run(context) {
      const name: string = context.flags.name;
      made.push(name);
      return undefined;
    },
  });
  const cli = createCli({ commands: [create], projectCommands: false });
  const named = async (argv: string[]) => {
    made.length = 0;
    const { io, err } = captureIO();
    return { code: await main(['thing', 'create', ...argv], cli, io), made: [...made], err };
  };

  it.each([
    [['--name', 'web-1']],
    [['web-1']],
    [['web-1', '--size', '2']],
    [['--size', '2', 'web-1']],
    [['web-1', '--name', 'web-1']],
    [['--name=web-1']],
  ])('%j names it web-1', async (argv) => {
    expect(await named(argv)).toEqual({ code: 0, made: ['web-1'], err: [] });
  });

  it.each([
    [
      ['web-1', '--name', 'web-2'],
      'INVALID_ARGUMENT: NAME is given twice, as the argument "web-1" and as --name "web-2"; give it once',
    ],
    [[], 'INVALID_ARGUMENT: missing NAME: give it as --name NAME or as the argument'],
    [
      ['web-1', 'web-2'],
      'INVALID_ARGUMENT: unexpected argument 2 for "thing create": it takes one argument, NAME (the argument is not shown)',
    ],
    [
      ['tok_Zq3xW8vN2kLp5RtY7uB0cD4eF6gH9jKmA1sTuXy', '--name', 'web-2'],
      'INVALID_ARGUMENT: NAME is given twice, as the argument a value that looks like a credential (not shown) and as --name "web-2"; give it once',
    ],
  ])('%j is a usage mistake: exit 2, nothing made', async (argv, printed) => {
    const result = await named(argv);
    expect(result.code).toBe(2);
    expect(result.made).toEqual([]);
    expect(result.err[0]).toBe(printed);
  });

  it('help shows the guide’s --name and says the argument works too', async () => {
    const { io, out } = captureIO();
    await cli.run(['thing', 'create', '--help'], io);
    expect(out[0]).toMatch(/--name NAME\s+The thing’s name; also taken as the argument NAME \(required\)/);
  });

  it('every built-in create that takes a name takes it through nameFlag', () => {
    const creates = builtinCommands.filter(
      (c) => /^[\w-]+ (create|register)$/.test(c.name) && c.flags && 'name' in c.flags,
    );
    expect(creates.map((c) => c.name).sort()).toEqual([
      'flavors create',
      'images register',
      'instances create',
      'pools create',
      'projects create',
      'sandbox-template create',
      'sandbox-volume create',
      'sites create',
    ]);
    for (const command of creates) {
      expect(command.flags!.name, command.name).toMatchObject({
        type: 'string',
        required: true,
        argument: true,
      });
      expect(command.positionals ?? [], command.name).toEqual([]);
    }
  });
});

describe('the built-in commands, as a person meets them', () => {
  const cli = createCli({ projectCommands: false });
  async function line(argv: string[]) {
    const { io, out, err } = captureIO();
    const status = await main(argv, cli, io);
    return { status, out, err };
  }
  const formatLine = (help: string) =>
    help.split('\n').find((text) => text.trimStart().startsWith('--format '));

  it.each([
    ['pools list', 'a table'],
    ['events list', 'a table'],
    ['nodes list', 'a table'],
    ['inventory diff', 'indented JSON'],
    ['reservations get', 'indented JSON'],
    ['capacity', 'a table; indented JSON with --preview'],
    ['api', 'indented JSON; a table with --list'],
  ])('help %s says what --format defaults to: %s', async (command, words) => {
    const { status, out } = await line(['help', ...command.split(' ')]);
    expect(status).toBe(0);
    expect(formatLine(out[0]!)).toMatch(
      new RegExp(
        `^  --format json\\|compact\\|table +Output format: indented JSON, JSON on one line, or a table \\(default: ${words.replace(/[()]/g, '\\$&')}\\)$`,
      ),
    );
  });

  it('an unknown command under a known group is reported with every word given', async () => {
    expect(await line(['events', 'foo'])).toEqual({
      status: 2,
      out: [],
      err: [
        'INVALID_COMMAND: unknown command "events foo"',
        'hint: Run "better-compute events" for the commands under events, or "better-compute help" for every command.',
      ],
    });
    expect((await line(['events', 'zzzzzzzz'])).err[0]).toBe(
      'INVALID_COMMAND: unknown command "events zzzzzzzz"',
    );
    expect((await line(['nodes', 'foo'])).err[0]).toBe(
      'INVALID_COMMAND: unknown command "nodes foo"; did you mean "nodes get"?',
    );
    expect((await line(['nodes', 'zzzzzzzz'])).err[0]).toBe(
      'INVALID_COMMAND: unknown command "nodes zzzzzzzz"',
    );
    expect((await line(['help', 'events', 'foo'])).err[0]).toBe(
      'INVALID_COMMAND: unknown command "events foo"',
    );
    expect((await line(['evnts', 'list'])).err[0]).toBe(
      'INVALID_COMMAND: unknown command "evnts list"; did you mean "events list"?',
    );
  });

  it('a group lists its commands, counted in words that agree', async () => {
    const events = await line(['events']);
    expect(events.status).toBe(0);
    expect(events.out[0]!.split('\n').slice(0, 4)).toEqual([
      'better-compute events: 2 commands',
      '',
      expect.stringMatching(/^  events list {2}/),
      expect.stringMatching(/^  events watch {2}/),
    ]);
    expect((await line(['nodes'])).out[0]).toMatch(/^better-compute nodes: \d+ commands\n/);
  });
});

describe('running from code', () => {
  it('runCli resolves with the result and prints it; rejects with the failure', async () => {
    const { io, out } = captureIO();
    await expect(runCli(['version'], io)).resolves.toBe('better-compute 0.1.0');
    expect(out).toEqual(['better-compute 0.1.0']);
    await expect(runCli(['nope'], captureIO().io)).rejects.toMatchObject({ code: 'INVALID_COMMAND' });
  });

  it('createCli adds your commands, with output formatting and --query', async () => {
    const cli = createCli({
      projectCommands: false,
      commands: [
        defineCommand({
          name: 'seed',
          summary: 'Create the demo sites and pools',
          target: 'none',
          flags: { region: { type: 'string', description: 'Region label', default: 'eu' } },
          run: ({ flags }) => ({ created: true, region: flags.region }),
        }),
      ],
    });
    const { io, out } = captureIO();
    await cli.run(['seed', '--region', 'us', '--format', 'compact'], io);
    await cli.run(['seed', '--query', 'region'], io);
    expect(out).toEqual(['{"created":true,"region":"us"}', 'eu']);
    const help = captureIO();
    await cli.run(['help'], help.io);
    expect(help.out[0]).toContain(
      'Project: Commands of this configuration\n  seed  Create the demo sites and pools',
    );
  });

  it('main returns 0, and prints failures on err', async () => {
    const { io, out, err } = captureIO();
    expect(await main(['version'], undefined, io)).toBe(0);
    expect(out).toEqual(['better-compute 0.1.0']);
    expect(err).toEqual([]);
  });

  it('computeCommands turns every built-in command into another framework’s spec', async () => {
    const specs = computeCommands((spec: HostCommandSpec) => spec, { exclude: ['dev', 'serve'] });
    const names = specs.map((s) => s.name);
    expect(names).toContain('compute-version');
    expect(names).toContain('compute-auth-login');
    expect(names).toContain('compute-api');
    expect(names).not.toContain('compute-dev');
    expect(names).not.toContain('compute-serve');
    const login = specs.find((s) => s.name === 'compute-auth-login')!;
    expect(login.group).toBe('Compute');
    expect(Object.keys(login.flags)).toEqual(['verify', 'config', 'url']);
    const spaced = computeCommands((spec: HostCommandSpec) => spec.name, {
      prefix: 'compute ',
      separator: ' ',
    });
    expect(spaced).toContain('compute auth login');
  });

  it('a host built on createCli runs compute’s commands, which print their own output', async () => {
    const host = createCli({
      builtins: false,
      projectCommands: false,
      commands: computeCommands(defineCommand as (spec: HostCommandSpec) => AnyCommand, {
        exclude: ['dev', 'serve'],
      }),
    });
    const { io, out, err } = captureIO();
    await host.run(['compute-version'], io);
    expect(out).toEqual(['better-compute 0.1.0']);
    expect(await main(['compute-help', 'nosuch'], host, io)).toBe(2);
    // Compute printed its own failure; the host does not print it again.
    expect(err).toEqual([
      'INVALID_COMMAND: unknown command "nosuch"',
      'hint: Run "better-compute help" for every command.',
    ]);
  });
});
