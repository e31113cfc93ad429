/**
 * Placement, as a pure function over free GPU groups (GPUs of one node sharing a product and an
 * NVLink domain). Best fit: the node (or, with NVLink, the domain) with the fewest free GPUs that
 * still hold the request, so large holes stay whole for large requests; when no single node holds
 * a request without NVLink, it spreads over the fewest nodes, largest first. placement-sql.ts
 * (`findPlacement`) asks the same rule of the database, then calls `place` on the rows it found.
 */
export interface FreeGroup {
  nodeId: string;
  /** The node's join order, which breaks ties (ids are random; this is stable). */
  nodeSeq: number;
  groupNo: number;
  nvlinkDomain: string | null;
  free: number;
}

export interface Allocation {
  nodeId: string;
  groupNo: number;
  count: number;
}

const byKey = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** Within one node: the smallest group that holds `count`, else the largest groups first. */
function allocateOnNode(groups: FreeGroup[], count: number): Allocation[] {
  const fitting = groups
    .filter((g) => g.free >= count)
    .sort((a, b) => a.free - b.free || a.groupNo - b.groupNo);
  if (fitting[0]) return [{ nodeId: fitting[0].nodeId, groupNo: fitting[0].groupNo, count }];
  const result: Allocation[] = [];
  let left = count;
  for (const g of [...groups].sort((a, b) => b.free - a.free || a.groupNo - b.groupNo)) {
    if (left === 0) break;
    const take = Math.min(g.free, left);
    if (take > 0) result.push({ nodeId: g.nodeId, groupNo: g.groupNo, count: take });
    left -= take;
  }
  return result;
}

function placeAnywhere(groups: FreeGroup[], count: number): Allocation[] | null {
  const nodes = new Map<string, FreeGroup[]>();
  for (const g of groups) if (g.free > 0) nodes.set(g.nodeId, [...(nodes.get(g.nodeId) ?? []), g]);
  const totals = [...nodes].map(([nodeId, list]) => ({
    nodeId,
    seq: list[0]!.nodeSeq,
    list,
    free: list.reduce((s, g) => s + g.free, 0),
  }));
  const single = totals.filter((n) => n.free >= count).sort((a, b) => a.free - b.free || a.seq - b.seq)[0];
  if (single) return allocateOnNode(single.list, count);
  if (totals.reduce((s, n) => s + n.free, 0) < count) return null;
  const result: Allocation[] = [];
  let left = count;
  for (const node of totals.sort((a, b) => b.free - a.free || a.seq - b.seq)) {
    if (left === 0) break;
    const take = Math.min(node.free, left);
    result.push(...allocateOnNode(node.list, take));
    left -= take;
  }
  return result;
}

/**
 * Where `count` GPUs go, or null when they do not fit. With `nvlink`, all in one NVLink domain, even
 * one GPU: a GPU without NVLink is in no domain, and the binding would say so.
 */
export function place(groups: readonly FreeGroup[], count: number, nvlink: boolean): Allocation[] | null {
  if (!nvlink) return placeAnywhere([...groups], count);
  const domains = new Map<string, FreeGroup[]>();
  for (const g of groups)
    if (g.nvlinkDomain !== null && g.free > 0)
      domains.set(g.nvlinkDomain, [...(domains.get(g.nvlinkDomain) ?? []), g]);
  const best = [...domains]
    .map(([domain, list]) => ({ domain, list, free: list.reduce((s, g) => s + g.free, 0) }))
    .filter((d) => d.free >= count)
    .sort((a, b) => a.free - b.free || byKey(a.domain, b.domain))[0];
  return best ? placeAnywhere(best.list, count) : null;
}

/**
 * The earliest time `count` GPUs fit, given the groups' free GPUs now and the GPUs running
 * reservations give back when they end. Null when they never fit on these groups.
 */
export function earliestFit(
  groups: readonly FreeGroup[],
  releases: readonly { nodeId: string; groupNo: number; count: number; at: number }[],
  count: number,
  nvlink: boolean,
  now: number,
): number | null {
  const state = new Map(groups.map((g) => [`${g.nodeId}/${g.groupNo}`, { ...g }]));
  if (place([...state.values()], count, nvlink)) return now;
  const times = [...new Set(releases.map((r) => r.at))].sort((a, b) => a - b);
  for (const at of times) {
    for (const r of releases) {
      if (r.at !== at) continue;
      const g = state.get(`${r.nodeId}/${r.groupNo}`);
      if (g) g.free += r.count;
    }
    if (place([...state.values()], count, nvlink)) return Math.max(at, now);
  }
  return null;
}
