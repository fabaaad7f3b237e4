// Whether a wasm-bindgen bundle instantiates: node scripts/wasm-instantiates.mjs DIR (exit status 0 if so).
// scripts/build-web.sh runs it after wasm-opt: Debian's binaryen 108 writes a wasm whose externref table
// the browser rejects at start-up, and this catches that without a browser.
import { readFileSync } from 'fs';
import { resolve } from 'path';
const dir = resolve(process.argv[2]);
const glue = await import(dir + '/kvscope.js');
try {
  glue.initSync({ module: readFileSync(dir + '/kvscope_bg.wasm') });
} catch (e) {
  console.log(String(e));
  process.exit(1);
}
