/**
 * The machine's inventory, read from /proc and /sys: CPUs, memory, disks and NICs; GPUs from
 * `nvidia-smi` when it is installed, or from an inventory file (test hosts, and machines whose
 * GPUs the operator describes). `inventory` is what the fleet places on; `hardware` (disks, NICs)
 * travels with the session for operators.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';

interface GpuInventory {
  index: number;
  model: string;
  product: string;
  vramGiB: number;
  nvlinkDomain: string | null;
}

export interface MachineInventory {
  inventory: { cpuCores: number; memoryGiB: number; gpus: GpuInventory[] };
  hardware: {
    disks: { name: string; sizeBytes: number; rotational: boolean }[];
    nics: { name: string; mac: string | null; speedMbps: number | null }[];
  };
}

export interface InventorySources {
  proc?: string;
  sys?: string;
  /** A JSON file with `{ gpus: [...] }` (or an array of GPUs), used instead of nvidia-smi. */
  gpuInventoryFile?: string | undefined;
}

function readText(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}

function cpuCores(proc: string): number {
  const info = readText(join(proc, 'cpuinfo'));
  const count = info ? (info.match(/^processor\s*:/gm) ?? []).length : 0;
  return Math.max(1, count || cpus().length);
}

function memoryGiB(proc: string): number {
  const match = /^MemTotal:\s+(\d+)\s+kB/m.exec(readText(join(proc, 'meminfo')) ?? '');
  const kib = match ? Number(match[1]) : 0;
  return Math.max(1, Math.round(kib / 1024 / 1024));
}

/** Block devices with a size: whole disks and attached loop devices (a hot-added disk image shows here). */
function disks(sys: string): MachineInventory['hardware']['disks'] {
  let names: string[] = [];
  try {
    names = readdirSync(join(sys, 'block'));
  } catch {
    return [];
  }
  return names
    .filter((name) => !/^(ram|zram)\d+$/.test(name))
    .map((name) => ({
      name,
      sizeBytes: Number(readText(join(sys, 'block', name, 'size'))?.trim() ?? 0) * 512,
      rotational: readText(join(sys, 'block', name, 'queue', 'rotational'))?.trim() === '1',
    }))
    .filter((disk) => disk.sizeBytes > 0)
    .sort((a, b) => a.name.localeCompare(b.name));
}

function nics(sys: string): MachineInventory['hardware']['nics'] {
  let names: string[] = [];
  try {
    names = readdirSync(join(sys, 'class', 'net'));
  } catch {
    return [];
  }
  return names
    .filter((name) => name !== 'lo')
    .map((name) => {
      const speed = Number(readText(join(sys, 'class', 'net', name, 'speed'))?.trim());
      const mac = readText(join(sys, 'class', 'net', name, 'address'))?.trim() || null;
      return { name, mac, speedMbps: Number.isInteger(speed) && speed > 0 ? speed : null };
    })
    .sort((a, b) => a.name.localeCompare(b.name));
}

const PRODUCT = /[^A-Za-z0-9._-]+/g;
/** `NVIDIA H100 80GB HBM3` → model `H100`, product `H100-80GB-HBM3`. */
export function gpuNames(name: string): { model: string; product: string } {
  const words = name
    .replace(/^NVIDIA\s+/i, '')
    .trim()
    .split(/\s+/)
    .filter(Boolean);
  const product = words.join('-').replace(PRODUCT, '-').slice(0, 64) || 'GPU';
  const model = (words[0] ?? 'GPU').replace(PRODUCT, '-').slice(0, 64);
  return { model, product };
}

/** GPUs from `nvidia-smi --query-gpu`, with NVLink domains from `nvidia-smi topo -m` (GPUs joined by NV# links). */
export function nvidiaGpus(run: (args: string[]) => string | null = runNvidiaSmi): GpuInventory[] | null {
  const csv = run(['--query-gpu=index,name,memory.total,uuid', '--format=csv,noheader,nounits']);
  if (csv === null) return null;
  const gpus = csv
    .split('\n')
    .map((line) => line.split(',').map((cell) => cell.trim()))
    .filter((cells) => cells.length >= 3 && /^\d+$/.test(cells[0]!))
    .map((cells) => ({
      index: Number(cells[0]),
      ...gpuNames(cells[1]!),
      vramGiB: Math.max(1, Math.round(Number(cells[2]) / 1024)),
      nvlinkDomain: null as string | null,
    }));
  const topo = run(['topo', '-m']);
  if (topo) {
    // Union GPUs linked by NVLink (NV1, NV12, …); a group of two or more is one domain.
    const parent = new Map<number, number>(gpus.map((g) => [g.index, g.index]));
    const find = (i: number): number => (parent.get(i) === i ? i : find(parent.get(i)!));
    for (const line of topo.split('\n')) {
      const row = /^GPU(\d+)\s+(.*)$/.exec(line.trim());
      if (!row) continue;
      row[2]!.split(/\s+/).forEach((cell, column) => {
        if (/^NV\d+$/.test(cell) && parent.has(column) && parent.has(Number(row[1]))) {
          parent.set(find(column), find(Number(row[1])));
        }
      });
    }
    const sizes = new Map<number, number>();
    for (const g of gpus) sizes.set(find(g.index), (sizes.get(find(g.index)) ?? 0) + 1);
    for (const g of gpus) if ((sizes.get(find(g.index)) ?? 0) > 1) g.nvlinkDomain = `nvl-gpu${find(g.index)}`;
  }
  return gpus;
}

function runNvidiaSmi(args: string[]): string | null {
  try {
    return execFileSync('nvidia-smi', args, {
      encoding: 'utf8',
      timeout: 10_000,
      stdio: ['ignore', 'pipe', 'ignore'],
    });
  } catch {
    return null;
  }
}

function gpusFromFile(file: string): GpuInventory[] {
  const parsed = JSON.parse(readFileSync(file, 'utf8')) as unknown;
  const list = Array.isArray(parsed) ? parsed : (parsed as { gpus?: unknown }).gpus;
  if (!Array.isArray(list)) throw new Error(`${file} holds no GPU list (expected { "gpus": [...] })`);
  return list.map((gpu: Record<string, unknown>) => ({
    index: Number(gpu.index),
    model: String(gpu.model),
    product: String(gpu.product),
    vramGiB: Number(gpu.vramGiB),
    nvlinkDomain:
      gpu.nvlinkDomain === undefined || gpu.nvlinkDomain === null ? null : String(gpu.nvlinkDomain),
  }));
}

export function readMachineInventory(sources: InventorySources = {}): MachineInventory {
  const proc = sources.proc ?? '/proc';
  const sys = sources.sys ?? '/sys';
  const gpus = sources.gpuInventoryFile ? gpusFromFile(sources.gpuInventoryFile) : (nvidiaGpus() ?? []);
  return {
    inventory: { cpuCores: cpuCores(proc), memoryGiB: memoryGiB(proc), gpus },
    hardware: { disks: disks(sys), nics: nics(sys) },
  };
}
