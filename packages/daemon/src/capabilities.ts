/** What a daemon says it can do in its hello (the capabilities the server places work by). */
import { accessSync, constants, existsSync } from 'node:fs';
import { bwrapAvailable } from './runtimes/index.js';

/** What this machine can do, as the Interactive access section and the runtimes ask. */
export function capabilities(options: { pty?: boolean; siteAgent?: boolean; pxe?: boolean } = {}): string[] {
  const found = ['exec.script', 'inventory.refresh', 'ssh.trust'];
  // A site agent reaches its site's BMCs with the drivers of ./metal (ipmitool for IPMI).
  if (options.siteAgent) found.push('site.agent');
  // It runs the site's provisioning network (bcd run --pxe-dir): it takes metal.boot-entries.
  if (options.pxe) found.push('site.pxe');
  if (options.pty ?? true) found.push('pty');
  const onPath = (name: string) =>
    (process.env.PATH ?? '/usr/bin:/bin').split(':').some((dir) => {
      try {
        accessSync(`${dir}/${name}`, constants.X_OK);
        return true;
      } catch {
        return false;
      }
    });
  // QEMU runs instances and qemu sandboxes (whose way in is the guest's own sshd); bwrap sandboxes
  // need bubblewrap, and their way in the host's sshd and nsenter, run as root.
  const qemu = onPath('qemu-system-x86_64');
  const bwrap = bwrapAvailable();
  if (qemu) found.push('runtime.qemu');
  if (bwrap) found.push('runtime.bwrap');
  if (qemu || bwrap) found.push('tunnel.sandbox-ssh');
  if (existsSync('/dev/kvm')) found.push('kvm');
  found.push('tunnel.instance-dial');
  return found.sort();
}
