// `npm pack` / `npm publish` from the repository: copies ../../include (the header-only library)
// into the package folder, so the package builds on its own; postpack (--clean) removes the copy.
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const pkg = path.resolve(__dirname, '..');
const dst = path.join(pkg, 'include');
const src = path.join(pkg, '..', '..', 'include');
fs.rmSync(dst, { recursive: true, force: true });
if (process.argv[2] !== '--clean') {
  if (!fs.existsSync(path.join(src, 'edgellm.hpp'))) {
    console.error(`edgellm: ${src}/edgellm.hpp not found: pack from bindings/napi of the repository`);
    process.exit(1);
  }
  fs.cpSync(src, dst, { recursive: true });
}
