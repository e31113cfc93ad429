/**
 * `secrets put NAME (--value-file FILE | --stdin) [--if-version N] [--key K]`: secrets.put. The
 * value comes from a file or standard input only, never from an argument; the answer is the
 * secret's metadata (its id, version and reference), never the value.
 */
import { defineCommand } from '../../define.js';
import { defined, ifVersionFlag, keyFlag, withIdempotencyKey } from '../shared.js';
import { readSecretValue, secretNamed, secretPositional } from './shared.js';

export default defineCommand({
  name: 'secrets put',
  group: 'Access',
  summary: 'Create a secret or give it a new version, the value from a file or standard input (secrets.put)',
  description:
    'The value is read from --value-file or --stdin, exactly as it is (a trailing newline too: use printf, not echo), ' +
    'never from an argument, and never shown again. The answer names the secret and its version, and the reference ' +
    'templates use: secret://TENANT/sec_….',
  target: 'token',
  calls: ['secrets.put'],
  positionals: [secretPositional],
  flags: {
    valueFile: {
      type: 'string',
      description: 'Read the value from this file (at most 32,768 bytes of UTF-8 text)',
      placeholder: 'FILE',
    },
    stdin: { type: 'boolean', description: 'Read the value from standard input' },
    ifVersion: ifVersionFlag,
    key: keyFlag,
  },
  examples: [
    'better-compute secrets put openai --value-file openai.key',
    'printf \'%s\' "$OPENAI_API_KEY" | better-compute secrets put openai --stdin',
  ],
  async run(context) {
    const { args, flags, api, io } = context;
    const value = await readSecretValue(io.cwd, flags, io.stdin?.bind(io));
    const client = await api();
    return withIdempotencyKey(context, flags.key, (idempotencyKey) =>
      client.call(
        'secrets.put',
        defined({ ...secretNamed(args.secret), value, ifVersion: flags.ifVersion, idempotencyKey }),
      ),
    );
  },
});
