/**
 * `instances create --pool --flavor [--image] --name [--ssh-key FILE.pub]… [--user-data FILE]
 * [--no-egress] [--key KEY] [--wait SECONDS]`: instances.create, retry-safe with --key. The keys
 * and user data are read from files here, never taken from the command line.
 */
import { defineCommand, nameFlag } from '../../define.js';
import { keyFlag, withIdempotencyKey } from '../shared.js';
import { readSmallFile, waitFlag, waitSettled } from './shared.js';

export default defineCommand({
  name: 'instances create',
  group: 'VPS',
  summary: 'Create an instance of a flavor and image on a VPS pool, and boot it (instances.create)',
  target: 'token',
  calls: ['instances.create', 'instances.get'],
  flags: {
    pool: { type: 'id', kind: 'pool', required: true, description: 'The VPS pool' },
    flavor: { type: 'id', kind: 'flavor', required: true, description: 'A flavor of the pool' },
    image: {
      type: 'id',
      kind: 'image',
      description: 'The image it boots; left out, the newest on the flavor’s channel',
    },
    name: nameFlag('Its host name'),
    sshKey: {
      type: 'string',
      repeated: true,
      description: 'An OpenSSH public key file whose keys may log in; repeatable',
      placeholder: 'FILE.pub',
    },
    userData: {
      type: 'string',
      description: 'A cloud-init user-data file for its first boot',
      placeholder: 'FILE',
    },
    noEgress: {
      type: 'boolean',
      description: 'The guest opens no connection beyond its node (the node still reaches it)',
    },
    key: keyFlag,
    wait: waitFlag,
  },
  examples: [
    'better-compute instances create --pool pool_01k… --flavor flv_01k… --image img_01k… --name web-1 --ssh-key ~/.ssh/id_ed25519.pub --wait 300',
  ],
  async run(context) {
    const { flags, api, io } = context;
    const sshKeys: string[] = [];
    for (const file of flags.sshKey)
      for (const line of (await readSmallFile(io.cwd, 'ssh-key', file, 65536)).split('\n'))
        if (line.trim() && !line.trim().startsWith('#')) sshKeys.push(line.trim());
    const userData = flags.userData ? await readSmallFile(io.cwd, 'user-data', flags.userData, 32768) : null;
    const client = await api();
    const created = await withIdempotencyKey(context, flags.key, (idempotencyKey) =>
      client.call('instances.create', {
        poolId: flags.pool,
        flavorId: flags.flavor,
        ...(flags.image ? { imageId: flags.image } : {}),
        name: flags.name,
        sshKeys,
        userData,
        egress: !flags.noEgress,
        idempotencyKey,
      }),
    );
    return waitSettled(context, client, created, flags.wait);
  },
});
