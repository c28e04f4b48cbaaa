// `npm install`: builds edgellm.node with CMake (npm/CMakeLists.txt) into build/, against the
// running Node's node_api.h. Needs cmake >= 3.17 and a C++17 compiler; EDGELLM_PORTABLE=1 builds
// without -march=native (for a machine other than this one); EDGELLM_JOBS sets the build's jobs.
'use strict';
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const pkg = path.resolve(__dirname, '..');
const build = path.join(pkg, 'build');

function fail(msg) {
  console.error(`edgellm: ${msg}`);
  process.exit(1);
}

// node_api.h: the official binaries' include/node beside bin/, Debian's /usr/include/node, or
// the headers node-gyp downloaded for this version.
function nodeApiInclude() {
  const candidates = [
    process.env.EDGELLM_NODE_API_INCLUDE,
    path.join(path.dirname(process.execPath), '..', 'include', 'node'),
    '/usr/include/node',
    '/usr/local/include/node',
    path.join(os.homedir(), '.cache', 'node-gyp', process.versions.node, 'include', 'node'),
  ];
  for (const c of candidates) if (c && fs.existsSync(path.join(c, 'node_api.h'))) return c;
  fail(`node_api.h not found (looked in ${candidates.filter(Boolean).join(', ')}); set EDGELLM_NODE_API_INCLUDE`);
}

function run(args) {
  const r = spawnSync('cmake', args, { stdio: 'inherit' });
  if (r.error) fail(`cmake: ${r.error.message} (install CMake >= 3.17)`);
  if (r.status !== 0) fail(`cmake ${args.join(' ')} failed`);
}

run(['-S', path.join(pkg, 'npm'), '-B', build, '-DCMAKE_BUILD_TYPE=Release', `-DNODE_API_INCLUDE=${nodeApiInclude()}`,
     `-DEDGELLM_PORTABLE=${process.env.EDGELLM_PORTABLE ? 'ON' : 'OFF'}`]);
run(['--build', build, '-j', process.env.EDGELLM_JOBS || String(Math.max(1, os.cpus().length))]);
if (!fs.existsSync(path.join(build, 'edgellm.node'))) fail('the build made no build/edgellm.node');
