// The TypeScript declarations, checked with the TypeScript compiler (a
// devDependency): index.d.ts on its own, strictly, and types/consumer.ts,
// a user's program that uses the package through `import ... from 'pqrun'`
// with pg's types, and whose @ts-expect-error lines must each be an error;
// and the values it declares against what the package exports.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { test } from 'node:test';

const require = createRequire(import.meta.url);
const tsc = require.resolve('typescript/bin/tsc');
const here = path.dirname(fileURLToPath(import.meta.url));
// the declarations of the package as installed (or of this tree)
const declarations = path.join(path.dirname(require.resolve('pqrun/package.json')), 'index.d.ts');

async function compile(project) {
  try {
    await promisify(execFile)(process.execPath, [tsc, '-p', project]);
  } catch (err) {
    assert.fail(`tsc -p ${project}:\n${err.stdout}${err.stderr}`);
  }
}

test('the package\'s index.d.ts compiles on its own, strictly', async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'pqrun-types-'));
  try {
    await writeFile(path.join(dir, 'tsconfig.json'), JSON.stringify({
      compilerOptions: {
        strict: true, noEmit: true, module: 'nodenext', lib: ['es2022', 'dom'], types: [], skipDefaultLibCheck: true,
      },
      files: [declarations],
    }));
    await compile(path.join(dir, 'tsconfig.json'));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('the values index.d.ts declares are the ones the package exports', async () => {
  const text = await readFile(declarations, 'utf8');
  const declared = [...text.matchAll(/^export (?:function|class|const) (\w+)/gm)].map((m) => m[1]);
  assert.deepEqual([...new Set(declared)].sort(), Object.keys(await import('pqrun')).sort());
});

test('a TypeScript program using the package compiles, and its mistakes are errors', async () => {
  await compile(path.join(here, 'types', 'tsconfig.json'));
});
