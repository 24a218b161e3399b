// Applies the device API patch (src/patchers/nvshmem/device-api.ts) to an NVSHMEM source tree in place, printing
// each fix and refusal: `npx tsx bench/device-api/patch-tree.ts <nvshmem-src>`. Exit 1 on a refusal.
import { writeChanges } from '../../src/patchers/engine/apply.ts';
import { planPatches } from '../../src/patchers/engine/plan.ts';
import { deviceApiSpecs } from '../../src/patchers/nvshmem/device-api.ts';
import { loadTemplate } from '../../src/patchers/nvshmem/template.ts';

const root = process.argv[2];
if (!root) throw new Error('usage: patch-tree.ts <nvshmem-src>');
const plan = await planPatches(root, deviceApiSpecs(await loadTemplate()));
for (const f of plan.fixes) console.log(`${f.status}\t${f.id}`);
for (const r of plan.refusals) console.log(`refused\t${r.id}\t${r.detail}`);
if (plan.refusals.length) process.exit(1);
await writeChanges(root, plan.changes);
