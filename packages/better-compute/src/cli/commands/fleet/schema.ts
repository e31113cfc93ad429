/**
 * `fleet schema [--out FILE]`: the FleetConfig document's JSON Schema (draft 2020-12), made from
 * the schema the server checks documents with; docs/fleet-config.schema.json is this output.
 */
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'fleet schema',
  group: 'Fleet',
  summary: 'Print the JSON Schema of the FleetConfig document, for editors and CI',
  target: 'none',
  flags: {
    out: {
      type: 'string',
      description: 'Write the schema to this new file (never over an existing one)',
      placeholder: 'FILE',
    },
  },
  examples: [
    'better-compute fleet schema > fleet-config.schema.json',
    'better-compute fleet schema --out fleet-config.schema.json',
  ],
  async run({ flags, io }) {
    const { fleetConfigJsonSchema } = await import('@better-compute/core/methods');
    const schema = fleetConfigJsonSchema();
    if (flags.out === undefined) return schema;
    const { writeJsonOut } = await import('../batch/files.js');
    return { out: await writeJsonOut(io, flags.out, schema, 'a schema is never written over a file') };
  },
});
