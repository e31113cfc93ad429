/**
 * Seeded fleets for the simulator: H100 nodes (8 GPUs, one NVLink domain), A100 nodes (8 GPUs in
 * two domains of 4), L40S nodes (4 GPUs, no NVLink) and GB200 racks (18 nodes of 4 GPUs sharing
 * one domain of 72), in a mix drawn from the seed.
 */
interface SimGpu {
  index: number;
  model: string;
  product: string;
  vramGiB: number;
  nvlinkDomain: string | null;
}

export interface SimNodeSpec {
  hostname: string;
  kind: 'h100' | 'a100' | 'l40s' | 'gb200';
  inventory: { cpuCores: number; memoryGiB: number; gpus: SimGpu[] };
  labels: Record<string, string>;
}

/** mulberry32: a small, fast, seedable generator; the same seed gives the same run. */
export function createRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

const gpus = (
  count: number,
  model: string,
  product: string,
  vramGiB: number,
  domain: (index: number) => string | null,
): SimGpu[] =>
  Array.from({ length: count }, (_, index) => ({
    index,
    model,
    product,
    vramGiB,
    nvlinkDomain: domain(index),
  }));

/** `count` node specs drawn from the seed. A rack is 18 nodes and is only started when it fits. */
export function seedFleet(count: number, random: () => number): SimNodeSpec[] {
  const specs: SimNodeSpec[] = [];
  let racks = 0;
  while (specs.length < count) {
    const n = specs.length;
    const name = (kind: string, i = n) => `sim-${kind}-${String(i).padStart(5, '0')}`;
    const zone = `zone-${Math.floor(random() * 3)}`;
    const roll = random();
    if (roll < 0.15 && count - n >= 18) {
      const rack = `rack-${racks++}`;
      for (let i = 0; i < 18; i++) {
        specs.push({
          hostname: name('gb200', n + i),
          kind: 'gb200',
          inventory: {
            cpuCores: 72,
            memoryGiB: 480,
            gpus: gpus(4, 'GB200', 'GB200-NVL72', 186, () => `nvl-${rack}`),
          },
          labels: { zone, rack },
        });
      }
    } else if (roll < 0.5) {
      specs.push({
        hostname: name('h100'),
        kind: 'h100',
        inventory: {
          cpuCores: 112,
          memoryGiB: 2048,
          gpus: gpus(8, 'H100', 'H100-SXM5-80GB', 80, () => `nvl-h100-${n}`),
        },
        labels: { zone },
      });
    } else if (roll < 0.75) {
      specs.push({
        hostname: name('a100'),
        kind: 'a100',
        inventory: {
          cpuCores: 128,
          memoryGiB: 1024,
          gpus: gpus(8, 'A100', 'A100-SXM4-40GB', 40, (i) => `nvl-a100-${n}-${i < 4 ? 0 : 1}`),
        },
        labels: { zone },
      });
    } else {
      specs.push({
        hostname: name('l40s'),
        kind: 'l40s',
        inventory: { cpuCores: 64, memoryGiB: 512, gpus: gpus(4, 'L40S', 'L40S-48GB', 48, () => null) },
        labels: { zone },
      });
    }
  }
  return specs.slice(0, count);
}
