/**
 * A bare-metal machine for the guest suites, as research/bare-metal-lab.md proved it: a QEMU machine
 * (TCG), with a raw disk file when it is given one, whose BMC is OpenIPMI's ipmi_sim. The BMC speaks IPMI over LAN on a loopback
 * UDP port, and QEMU's `ipmi-bmc-extern` device connects the machine to it. ipmi_sim's
 * `chassis_control` program (chassis.sh) is the machine's power: `power on` starts QEMU, `power off`
 * ends it (SIGKILL: the plug pulled), reset and soft-off go to QEMU's monitor, and the boot device
 * the BMC is told is what QEMU boots from next (`pxe`: the network card's iPXE ROM; anything else:
 * its disk, with no network ROM to fall back on).
 *
 * Ports are free ones found at start; every file is in `dir`. The machine's network card is on
 * `tap`, which the test makes and joins to the provisioning network's bridge.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { processStart } from '../../src/runtimes/ledger.js';

export interface LabMachineOptions {
  dir: string;
  tap: string;
  mac: string;
  uuid: string;
  bmcUser: string;
  bmcPassword: string;
  memoryMiB?: number;
  cpus?: number;
  /** A raw disk image file, attached as the machine's virtio disk (vda); none without it. */
  disk?: string;
}

async function freeTcpPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export async function freeUdpPort(): Promise<number> {
  const socket = createSocket('udp4');
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  const port = socket.address().port;
  await new Promise<void>((resolve) => socket.close(() => resolve()));
  return port;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class LabMachine {
  readonly consolePath: string;
  readonly chassisLog: string;
  private constructor(
    readonly options: LabMachineOptions,
    readonly ipmiPort: number,
    private readonly bmc: ChildProcess,
    private readonly bmcOutput: () => string,
  ) {
    this.consolePath = join(options.dir, 'console.log');
    this.chassisLog = join(options.dir, 'chassis.log');
  }

  /** Starts the BMC (the machine stays off until it is told otherwise). */
  static async start(options: LabMachineOptions): Promise<LabMachine> {
    const dir = options.dir;
    mkdirSync(join(dir, 'state'), { recursive: true });
    const [ipmiPort, vmPort] = [await freeUdpPort(), await freeTcpPort()];
    writeFileSync(
      join(dir, 'lan.conf'),
      [
        `name "lab"`,
        'set_working_mc 0x20',
        '  startlan 1',
        `    addr 127.0.0.1 ${ipmiPort}`,
        '    priv_limit admin',
        '    allowed_auths_callback none md2 md5 straight',
        '    allowed_auths_user none md2 md5 straight',
        '    allowed_auths_operator none md2 md5 straight',
        '    allowed_auths_admin none md2 md5 straight',
        '    guid a123456789abcdefa123456789abcdef',
        '  endlan',
        `  serial 15 127.0.0.1 ${vmPort} codec VM`,
        `  chassis_control "${join(dir, 'chassis.sh')}"`,
        `  user 2 true "${options.bmcUser}" "${options.bmcPassword}" admin 10 none md2 md5 straight`,
        '',
      ].join('\n'),
      { mode: 0o600 },
    );
    writeFileSync(
      join(dir, 'node.emu'),
      [
        'mc_setbmc 0x20',
        'mc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr',
        'sel_enable 0x20 1000 0x0a',
        'sensor_add 0x20 0 0 35 0x6f event-only',
        'sensor_set_event_support 0x20 0 0 enable scanning per-state \\',
        '\t000000000001111 000000000000000 \\',
        '\t000000000001111 000000000000000',
        'mc_enable 0x20',
        '',
      ].join('\n'),
    );
    const qemu = [
      'qemu-system-x86_64 -name lab -accel tcg',
      `-m ${options.memoryMiB ?? 384} -smp ${options.cpus ?? 1} -uuid ${options.uuid}`,
      '-nographic -vga none',
      `-chardev socket,id=ipmi0,host=127.0.0.1,port=${vmPort},reconnect=10`,
      '-device ipmi-bmc-extern,chardev=ipmi0,id=bmc0 -device isa-ipmi-bt,bmc=bmc0',
      `-netdev tap,id=net0,ifname=${options.tap},script=no,downscript=no`,
      `-device e1000,netdev=net0,mac=${options.mac}$ROM`,
      ...(options.disk ? [`-drive file=${options.disk},format=raw,if=virtio`] : []),
      '-boot $BOOT',
      `-chardev file,id=ser0,path=${join(dir, 'console.log')},append=on -serial chardev:ser0`,
      // A socket file, not a TCP port: a port picked now could be taken by the time the machine is powered on.
      `-monitor unix:${join(dir, 'monitor.sock')},server=on,wait=off`,
      `-pidfile ${join(dir, 'qemu.pid')}`,
    ].join(' ');
    writeFileSync(
      join(dir, 'vm.sh'),
      `#!/bin/sh
# Starts the machine as its BMC's boot device says; exec, so the pid in qemu.pid is QEMU's.
D=${dir}
exec >>$D/vm.log 2>&1
case "$(cat $D/bootdev 2>/dev/null)" in
  pxe) BOOT=order=n; ROM= ;;
  *) BOOT=order=c; ROM=,romfile= ;;
esac
echo "$(date +%T.%N) vm.sh: boot $BOOT"
exec ${qemu}
`,
    );
    writeFileSync(
      join(dir, 'chassis.sh'),
      `#!/bin/bash
# ipmi_sim's chassis_control program: get power|boot, set power|reset|shutdown|boot|identify.
# It must return at once: ipmi_sim waits for it.
D=${dir}
PIDF=$D/qemu.pid
echo "$(date +%T.%N) chassis.sh $*" >> $D/chassis.log
running() { [ -s $PIDF ] && [ "$(awk '{print $3}' /proc/$(cat $PIDF)/stat 2>/dev/null)" != Z ] && kill -0 "$(cat $PIDF)" 2>/dev/null; }
monitor() { "${process.execPath}" -e 'const s = require("net").connect(process.argv[1], () => s.end(process.argv[2] + "\\n")); s.on("close", () => process.exit(0)).on("error", () => process.exit(1)); setTimeout(() => process.exit(0), 1000);' $D/monitor.sock "$1"; }
op=$1; shift
case $op in
get)
  for k in "$@"; do
    case $k in
      power) if running; then echo power:1; else echo power:0; fi ;;
      boot) echo "boot:$(cat $D/bootdev 2>/dev/null || echo default)" ;;
    esac
  done ;;
set)
  while [ $# -ge 2 ]; do
    k=$1; v=$2; shift 2
    case $k in
      power)
        if [ "$v" = 1 ]; then
          if ! running; then setsid $D/vm.sh </dev/null >/dev/null 2>&1 & fi
        elif running; then
          kill -KILL "$(cat $PIDF)"; rm -f $PIDF
        fi ;;
      reset) running && monitor system_reset ;;
      shutdown) running && monitor system_powerdown ;;
      boot) echo "$v" > $D/bootdev ;;
    esac
  done ;;
esac
exit 0
`,
    );
    chmodSync(join(dir, 'vm.sh'), 0o755);
    chmodSync(join(dir, 'chassis.sh'), 0o755);
    let output = '';
    const bmc = spawn(
      'ipmi_sim',
      ['-c', join(dir, 'lan.conf'), '-f', join(dir, 'node.emu'), '-s', join(dir, 'state'), '-n', '-p'],
      { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    for (const stream of [bmc.stdout!, bmc.stderr!])
      stream.setEncoding('utf8').on('data', (chunk: string) => (output = (output + chunk).slice(-4000)));
    const machine = new LabMachine(options, ipmiPort, bmc, () => output);
    await sleep(300);
    if (bmc.exitCode !== null) throw new Error(`ipmi_sim exited at once:\n${output}`);
    return machine;
  }

  /** QEMU's pid while it runs (a zombie is not running), else null. */
  qemuPid(): number | null {
    try {
      const pid = Number(readFileSync(join(this.options.dir, 'qemu.pid'), 'utf8').trim());
      return pid > 0 && processStart(pid) !== null ? pid : null;
    } catch {
      return null;
    }
  }

  /** The serial console so far (BIOS, iPXE and kernel output). */
  console(): string {
    return existsSync(this.consolePath) ? readFileSync(this.consolePath, 'latin1').replace(/\r/g, '') : '';
  }

  /** Waits for `pattern` in what the console printed after `from` characters. */
  async waitForConsole(pattern: RegExp, from: number, timeoutMs: number): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const match = this.console().slice(from).match(pattern);
      if (match) return match[0];
      await sleep(200);
    }
    throw new Error(
      `no ${pattern} on the machine's console within ${timeoutMs} ms; it printed:\n${this.console().slice(from).slice(-3000)}`,
    );
  }

  async waitFor(what: string, check: () => boolean, timeoutMs: number): Promise<number> {
    const started = Date.now();
    while (!check()) {
      if (Date.now() - started > timeoutMs) throw new Error(`${what}: not within ${timeoutMs} ms`);
      await sleep(50);
    }
    return Date.now() - started;
  }

  bmcLog(): string {
    return this.bmcOutput();
  }

  /** What the machine's scripts and its BMC printed last: said with a failure, so a run on another host can be read. */
  diagnostics(): string {
    const tail = (file: string) =>
      existsSync(join(this.options.dir, file))
        ? readFileSync(join(this.options.dir, file), 'utf8').slice(-1500)
        : '(none)';
    return [
      `chassis.log:\n${tail('chassis.log')}`,
      `vm.log:\n${tail('vm.log')}`,
      `bootdev: ${tail('bootdev').trim()}; tap ${this.options.tap}: ${existsSync(`/sys/class/net/${this.options.tap}`) ? 'present' : 'absent'}`,
      `ipmi_sim (exit ${this.bmc.exitCode}):\n${this.bmcOutput().slice(-1500)}`,
    ].join('\n');
  }

  /** Ends QEMU and the BMC. */
  async stop(): Promise<void> {
    const pid = this.qemuPid();
    if (pid) process.kill(pid, 'SIGKILL');
    this.bmc.kill('SIGKILL');
    await this.waitFor('QEMU ends', () => this.qemuPid() === null, 5000).catch(() => undefined);
  }
}
