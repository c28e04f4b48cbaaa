// node check_types.mjs FILE.d.ts...: fails (exit 1, one line per finding) when a declaration file
// uses an inline object type ({ a: number } as a member's, parameter's or alias's type, mapped
// types included). ArkTS forbids object literals as types (arkts-no-obj-literals-as-types), and
// OpenHarmony apps read the module's index.d.ts as ArkTS: every object type must be a named
// interface. A `{` may open only an interface, class, namespace, module or enum body, or an
// import / export list.
import { readFileSync } from 'node:fs';

// Comments and string literals blanked (newlines kept, for line numbers).
function code(text) {
  let out = '';
  for (let i = 0; i < text.length;) {
    const two = text.slice(i, i + 2);
    let end = i;
    if (two === '//') end = text.indexOf('\n', i) < 0 ? text.length : text.indexOf('\n', i);
    else if (two === '/*') end = text.indexOf('*/', i + 2) < 0 ? text.length : text.indexOf('*/', i + 2) + 2;
    else if (`'"\``.includes(text[i])) {
      end = i + 1;
      while (end < text.length && text[end] !== text[i]) end += text[end] === '\\' ? 2 : 1;
      end = Math.min(text.length, end + 1);
    }
    if (end === i) {
      out += text[i++];
      continue;
    }
    out += text.slice(i, end).replace(/[^\n]/g, ' ');
    i = end;
  }
  return out;
}

const BODY = /^\s*(export\s+)?(declare\s+)?(default\s+)?(abstract\s+)?(interface|class|namespace|module|enum)\s[^=():]*$|^\s*(export|import|declare\s+global)\s*$/;

export function inlineObjectTypes(text) {
  const src = code(text);
  const found = [];
  let headStart = 0;
  for (let i = 0; i < src.length; ++i) {
    const c = src[i];
    if (c === '{') {
      const head = src.slice(headStart, i);
      if (!BODY.test(head)) {
        const line = src.slice(0, i).split('\n').length;
        found.push({ line, head: head.trim().replace(/\s+/g, ' ') });
      }
    }
    if (c === '{' || c === '}' || c === ';') headStart = i + 1;
  }
  return found;
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop())) {
  let bad = 0;
  for (const f of process.argv.slice(2)) {
    for (const { line, head } of inlineObjectTypes(readFileSync(f, 'utf8'))) {
      console.log(`${f}:${line}: an inline object type after '${head}': declare a named interface (ArkTS has no object literal types)`);
      ++bad;
    }
  }
  if (bad) process.exit(1);
  console.log(`ok: ${process.argv.slice(2).join(' ')}: named interfaces only`);
}
