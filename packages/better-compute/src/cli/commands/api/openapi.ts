/**
 * `openapi [--out FILE] [--base-path PATH]`: the OpenAPI 3.1 document of the built-in method table.
 * A deployment serves its own at `{basePath}/openapi.json`, with the plugin methods it loaded; this
 * command reads no configuration, so it knows the built-in table only (docs/openapi.md).
 */
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'openapi',
  // Beside the other tools that print what a deployment is made of (daemon install-script).
  group: 'Operate',
  summary: 'Print the OpenAPI 3.1 document of the built-in methods (a deployment serves its own)',
  target: 'none',
  output: false,
  flags: {
    out: {
      type: 'string',
      description: 'Write the document to this file (never over an existing one)',
      placeholder: 'FILE',
    },
    basePath: {
      type: 'string',
      description: 'The base path the routes are served under (default /api/compute)',
      placeholder: 'PATH',
    },
  },
  examples: [
    'better-compute openapi --out openapi.json',
    'better-compute openapi --base-path /compute | jq ".paths | keys"',
    'curl -s https://compute.example.com/api/compute/openapi.json   # with the deployment’s plugins',
  ],
  async run({ flags, io }) {
    const basePath = flags.basePath ?? '/api/compute';
    if (!/^\/[A-Za-z0-9._~/-]*$/.test(basePath) || basePath.startsWith('/api/iam')) {
      const { CliError } = await import('../../errors.js');
      throw new CliError('INVALID_ARGUMENT', '--base-path must be an absolute URL path other than /api/iam', {
        hint: 'Pass the configuration’s basePath, such as /api/compute.',
        details: { field: 'basePath' },
      });
    }
    const [{ methodList }, { documentText }] = await Promise.all([
      import('@better-compute/core/methods'),
      import('../../../http/openapi.js'),
    ]);
    const text = documentText(methodList, { basePath });
    if (flags.out) {
      const { createOutFile } = await import('../shared.js');
      const file = await createOutFile(io.cwd, flags.out, 'a document is never written over a file');
      await file.write(text);
      io.err?.(`wrote ${flags.out}`);
    } else {
      io.out(text.trimEnd());
    }
    return undefined;
  },
});
