// node package_files.mjs: `npm pack --dry-run` of bindings/napi lists what `npm install` needs to
// build and load the module on its own (the sources, the CMake files, the install script, the
// types and the header-only library copied in by prepack.js), and no tests or OpenHarmony files.
// Exit 77 (skipped) without npm. The full check, `npm pack` installed into an empty folder and
// run on stories260K, builds the module (minutes on two cores): docs/DEPLOY.md shows it.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const pkg = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const r = spawnSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts=false'], { cwd: pkg, encoding: 'utf8' });
if (r.error) {
  console.log(`skipped: npm not found (${r.error.message})`);
  process.exit(77);
}
if (r.status !== 0) {
  console.error(`FAIL: npm pack --dry-run: ${r.stderr}`);
  process.exit(1);
}
const files = new Set(JSON.parse(r.stdout)[0].files.map((f) => f.path));
const need = ['package.json', 'index.js', 'index.d.ts', 'edgellm_napi.cpp', 'exports.map', 'module.cmake', 'npm/CMakeLists.txt',
              'scripts/install.js', 'scripts/prepack.js', 'include/edgellm.hpp', 'include/edgellm/engine/embedding.hpp',
              'include/edgellm/engine/session.hpp', 'include/edgellm/kernels/select.hpp'];
let bad = 0;
for (const f of need) {
  if (!files.has(f)) {
    console.error(`FAIL: the package lacks ${f}`);
    ++bad;
  }
}
for (const f of files) {
  if (f.startsWith('test/') || f.startsWith('ohos/') || f.startsWith('build/')) {
    console.error(`FAIL: the package carries ${f}`);
    ++bad;
  }
}
if (bad) process.exit(1);
console.log(`ok: ${files.size} files, the module's sources, CMake, install script, types and include/`);
