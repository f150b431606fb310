// Compares two V8 heap snapshots of one process (the soak's SOAK_HEAP_SNAPSHOTS folder, or any pair written by
// `writeHeapSnapshot` or --heapsnapshot-signal): the count and self size of each constructor in both, and the
// objects allocated after the first snapshot and still alive in the second, grouped by what holds them (three
// retainers up). Object ids are stable within a process, so "allocated after" is "an id above the first snapshot's
// highest". Nothing here is part of the library.
//   scripts/node24.sh node --import @swc-node/register/esm-register bench/heap-diff.ts <first> <second> [rows]
import { readFileSync } from 'node:fs';

interface SnapshotFile {
  snapshot: {
    meta: { node_fields: string[]; node_types: [string[]]; edge_fields: string[]; edge_types: [string[]] };
  };
  nodes: number[];
  edges: number[];
  strings: string[];
}

interface Group {
  count: number;
  bytes: number;
}

class Heap {
  private readonly file: SnapshotFile;
  private readonly nodeFields: number;
  private readonly edgeFields: number;
  /** Where each node's edges start in `edges`, by node index (one more entry: the end). */
  private readonly firstEdge: Uint32Array;
  /** One retainer of each node (a node index), through the edge `retainingEdge` names; -1 for none. */
  private readonly retainer: Int32Array;
  private readonly retainingEdge: Int32Array;
  readonly size: number;

  constructor(path: string) {
    this.file = JSON.parse(readFileSync(path, 'utf8')) as SnapshotFile;
    const { meta } = this.file.snapshot;
    this.nodeFields = meta.node_fields.length;
    this.edgeFields = meta.edge_fields.length;
    this.size = this.file.nodes.length / this.nodeFields;
    this.firstEdge = new Uint32Array(this.size + 1);
    const edgeCount = meta.node_fields.indexOf('edge_count');
    for (let node = 0, edge = 0; node < this.size; node++) {
      this.firstEdge[node] = edge;
      edge += this.file.nodes[node * this.nodeFields + edgeCount] * this.edgeFields;
    }
    this.firstEdge[this.size] = this.file.edges.length;
    this.retainer = new Int32Array(this.size).fill(-1);
    this.retainingEdge = new Int32Array(this.size).fill(-1);
    const weak = meta.edge_types[0].indexOf('weak');
    for (let node = 0; node < this.size; node++) {
      for (let edge = this.firstEdge[node]; edge < this.firstEdge[node + 1]; edge += this.edgeFields) {
        if (this.file.edges[edge] === weak) continue;
        const target = this.file.edges[edge + 2] / this.nodeFields;
        if (this.retainer[target] === -1) {
          this.retainer[target] = node;
          this.retainingEdge[target] = edge;
        }
      }
    }
  }

  id(node: number): number {
    return this.file.nodes[node * this.nodeFields + 2];
  }

  selfSize(node: number): number {
    return this.file.nodes[node * this.nodeFields + 3];
  }

  /** The constructor's name for an object, `(closure name)` for a function, `(type)` for the rest. */
  label(node: number): string {
    const type = this.file.snapshot.meta.node_types[0][this.file.nodes[node * this.nodeFields]];
    const name = this.file.strings[this.file.nodes[node * this.nodeFields + 1]];
    if (type === 'object' || type === 'native') return name;
    if (type === 'closure') return `(closure ${name || 'anonymous'})`;
    return `(${type})`;
  }

  /** `Map.table <- system / Context.copies <- …`: what holds the node, `depth` steps up (`[]`: a slot, an element). */
  holders(node: number, depth: number): string {
    const steps: string[] = [];
    for (let at = node; steps.length < depth;) {
      const holder = this.retainer[at];
      if (holder <= 0) break;
      const edge = this.retainingEdge[at];
      const type = this.file.snapshot.meta.edge_types[0][this.file.edges[edge]];
      const name = type === 'element' || type === 'hidden' ? '' : this.file.strings[this.file.edges[edge + 1]];
      steps.push(`${this.label(holder)}.${/^\d*$/.test(name) ? '[]' : name}`);
      at = holder;
    }
    return steps.join(' <- ') || '(a root)';
  }

  groups(key: (node: number) => string, include: (node: number) => boolean = () => true): Map<string, Group> {
    const groups = new Map<string, Group>();
    for (let node = 0; node < this.size; node++) {
      if (!include(node)) continue;
      const group = groups.get(key(node)) ?? { count: 0, bytes: 0 };
      group.count++;
      group.bytes += this.selfSize(node);
      groups.set(key(node), group);
    }
    return groups;
  }
}

const megabytes = (bytes: number) => (bytes / 1_048_576).toFixed(2);

const [firstPath, secondPath, rowsArgument] = process.argv.slice(2);
if (!firstPath || !secondPath) {
  console.error('usage: heap-diff.ts <first.heapsnapshot> <second.heapsnapshot> [rows]');
  process.exit(2);
}
const rows = Number(rowsArgument ?? 15);
const first = new Heap(firstPath);
const second = new Heap(secondPath);

const before = first.groups((node) => first.label(node));
const after = second.groups((node) => second.label(node));
const total = (groups: Map<string, Group>) => [...groups.values()].reduce((sum, group) => sum + group.bytes, 0);
console.log(`self size of every object: ${megabytes(total(before))} MB, then ${megabytes(total(after))} MB`);
console.log('by constructor, the most grown first:');
console.table(
  [...after]
    .map(([label, { count, bytes }]) => {
      const earlier = before.get(label) ?? { count: 0, bytes: 0 };
      return { label, countBefore: earlier.count, countAfter: count, grownBytes: bytes - earlier.bytes };
    })
    .sort((a, b) => b.grownBytes - a.grownBytes)
    .slice(0, rows)
    .map(({ grownBytes, ...row }) => ({ ...row, grownMb: megabytes(grownBytes) })),
);

let highestId = 0;
for (let node = 0; node < first.size; node++) highestId = Math.max(highestId, first.id(node));
const newer = second.groups(
  (node) => `${second.label(node)} <- ${second.holders(node, 3)}`,
  (node) => second.id(node) > highestId,
);
console.log('allocated after the first snapshot and alive in the second, by what holds them:');
console.table(
  [...newer]
    .sort(([, a], [, b]) => b.bytes - a.bytes)
    .slice(0, rows)
    .map(([heldBy, { count, bytes }]) => ({ heldBy, count, mb: megabytes(bytes) })),
);
