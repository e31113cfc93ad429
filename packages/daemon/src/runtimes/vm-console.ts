/**
 * The serial consoles of the qemu runtime's VMs (qemu.ts). Each VM has a ring of the last 64 KiB its
 * guest wrote, fed by a connection to its console socket (made again when a restarted daemon finds
 * the VM): the guest's ready line is waited for in it, a power-off is told from a crash by it, and
 * a console session streams it. Output the guest wrote while no daemon listened is lost.
 */
import { connect, type Socket } from 'node:net';
import { Duplex } from 'node:stream';
import { ConsoleRing } from './qmp.js';

const CONSOLE_BYTES = 64 * 1024;
/** A console reader this far behind is cut off rather than buffered without end. */
const CONSOLE_BACKLOG = 1 << 20;

export interface VmConsole {
  ring: ConsoleRing;
  console: Socket | null;
}

export class VmConsoles {
  private readonly vms = new Map<string, VmConsole>();
  private closed = false;

  /** `socketOf` answers where a VM's console socket is; asked only when it is connected to. */
  constructor(private readonly socketOf: (id: string) => string) {}

  /** The VM's console as it is, attached or not. */
  get(id: string): VmConsole | undefined {
    return this.vms.get(id);
  }

  /** The VM's console ring, connected to its console socket (again, after a restart). */
  attach(id: string): VmConsole {
    let vm = this.vms.get(id);
    if (!vm) {
      vm = { ring: new ConsoleRing(CONSOLE_BYTES), console: null };
      this.vms.set(id, vm);
    }
    if (vm.console || this.closed) return vm;
    const socket = connect(this.socketOf(id));
    const current = vm;
    current.console = socket;
    socket.on('data', (chunk: Buffer) => current.ring.push(chunk));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      if (current.console === socket) current.console = null;
    });
    return vm;
  }

  /** Closes the connection to the VM's console; its ring (what the guest wrote last) stays. */
  disconnect(id: string): void {
    this.vms.get(id)?.console?.destroy();
  }

  /** Closes the connection and forgets the ring: a fresh boot's ready line is its own. */
  drop(id: string): void {
    this.disconnect(id);
    this.vms.delete(id);
  }

  /**
   * A console session: what the ring holds, then what the guest writes; what is written to the
   * stream goes to the guest.
   */
  open(id: string): Duplex {
    const vm = this.attach(id);
    const stream: Duplex = new Duplex({
      read() {},
      write(chunk: Buffer, _encoding, done) {
        if (!vm.console) return done(new Error('the console is not connected'));
        vm.console.write(chunk, () => done());
      },
      destroy(error, done) {
        stop();
        done(error);
      },
      final(done) {
        stop();
        done();
      },
    });
    const stop = vm.ring.listen((chunk) => {
      if (stream.readableLength > CONSOLE_BACKLOG)
        stream.destroy(new Error('the console reader fell behind'));
      else stream.push(chunk);
    });
    stream.push(vm.ring.contents());
    return stream;
  }

  /** The daemon stops: every connection closes, and none is made again. */
  close(): void {
    this.closed = true;
    for (const vm of this.vms.values()) vm.console?.destroy();
  }
}
