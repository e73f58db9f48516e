// execd's JavaScript driver: evaluates cells in one persistent vm context.
// Run as `node driver.js typescript <module>` it is the TypeScript driver:
// each cell is transpiled with the typescript module at <module> (types
// erased, no type checking) and then evaluated like a JavaScript cell.
// Requests arrive as JSON lines on stdin: {"id": "...", "code": "..."}.
// Events leave as JSON lines on file descriptor 3 (stdout and stderr stay
// free for child processes): {"id", "type": "stdout"|"stderr"|"result"|
// "error"|"done", "text"?, "ename"?, "evalue"?, "traceback"?}. Every cell
// ends with exactly one "done"; an "error" before it means the cell failed.
'use strict';

const fs = require('fs');
const vm = require('vm');
const util = require('util');
const readline = require('readline');
const { Console } = require('console');
const { Writable } = require('stream');

let current = null; // id of the cell being evaluated

let ts = null;
if (process.argv[2] === 'typescript') {
  try {
    ts = require(process.argv[3]);
    if (typeof ts.transpileModule !== 'function') throw new Error('no transpileModule in it');
  } catch (e) {
    fs.writeSync(2, `cannot load the typescript module from ${process.argv[3]}: ${e.message}\n`);
    process.exit(2);
  }
}

function emit(ev) {
  fs.writeSync(3, JSON.stringify(ev) + '\n');
}

function output(type) {
  return new Writable({
    write(chunk, enc, cb) {
      if (current !== null) emit({ id: current, type, text: chunk.toString() });
      cb();
    },
  });
}

const out = output('stdout');
const err = output('stderr');
// Raw writes to process.stdout/stderr are cell output too.
process.stdout.write = (chunk, enc, cb) => out.write(chunk, enc, cb);
process.stderr.write = (chunk, enc, cb) => err.write(chunk, enc, cb);

const sandbox = {
  console: new Console({ stdout: out, stderr: err }),
  require, process, Buffer, URL, URLSearchParams, TextEncoder, TextDecoder,
  setTimeout, clearTimeout, setInterval, clearInterval, setImmediate, clearImmediate,
  queueMicrotask, structuredClone, fetch: globalThis.fetch,
  __dirname: process.cwd(),
  module: { exports: {} },
};
sandbox.exports = sandbox.module.exports;
sandbox.__execd_import = execdImport;
sandbox.global = sandbox;
sandbox.globalThis = sandbox;
const context = vm.createContext(sandbox);

function errorEvent(id, e) {
  if (e instanceof Error || (e && typeof e === 'object' && 'stack' in e && 'message' in e)) {
    const stack = String(e.stack || `${e.name}: ${e.message}`);
    return { id, type: 'error', ename: String(e.name || 'Error'), evalue: String(e.message), traceback: stack.split('\n') };
  }
  const v = util.inspect(e);
  return { id, type: 'error', ename: 'Uncaught', evalue: v, traceback: ['Uncaught ' + v] };
}

function compile(code) {
  try {
    return new vm.Script(code, { filename: 'cell.js' });
  } catch (e) {
    // Top-level await: run the cell as an async function body. Its
    // declarations are then local to the cell.
    if (e instanceof SyntaxError && /await is only valid/.test(e.message)) {
      return new vm.Script(`(async () => {\n${code}\n})()`, { filename: 'cell.js' });
    }
    throw e;
  }
}

// tsDiagnosticsError is the error of a cell that does not parse.
function tsDiagnosticsError(diags) {
  const lines = diags.map((d) => {
    const msg = ts.flattenDiagnosticMessageText(d.messageText, '\n');
    if (d.file && d.start !== undefined) {
      const { line, character } = d.file.getLineAndCharacterOfPosition(d.start);
      return `cell.ts(${line + 1},${character + 1}): error TS${d.code}: ${msg}`;
    }
    return `error TS${d.code}: ${msg}`;
  });
  const e = new SyntaxError(ts.flattenDiagnosticMessageText(diags[0].messageText, '\n'));
  e.stack = lines.join('\n');
  return e;
}

// importsToRequires rewrites the cell's top-level imports as var bindings
// of require() calls, keeping their names: transpiled as a module, a cell
// would bind them under other names (fs_1.default), and const bindings
// could not be imported again by a later cell.
function importsToRequires(code) {
  const sf = ts.createSourceFile('cell.ts', code, ts.ScriptTarget.Latest, true);
  let out = '';
  let pos = 0;
  for (const st of sf.statements) {
    let js = null;
    if (ts.isImportDeclaration(st)) {
      const spec = JSON.stringify(st.moduleSpecifier.text);
      const c = st.importClause;
      const parts = [];
      if (!c) {
        parts.push(`require(${spec});`);
      } else if (!c.isTypeOnly) {
        const m = `__execd_import(${spec})`;
        if (c.name) parts.push(`var ${c.name.text} = ${m}.default;`);
        const nb = c.namedBindings;
        if (nb && ts.isNamespaceImport(nb)) parts.push(`var ${nb.name.text} = ${m}.namespace;`);
        if (nb && ts.isNamedImports(nb)) {
          for (const el of nb.elements) {
            if (el.isTypeOnly) continue;
            const from = (el.propertyName || el.name).text;
            parts.push(`var ${el.name.text} = ${m}.namespace[${JSON.stringify(from)}];`);
          }
        }
      }
      js = parts.join(' ');
    } else if (ts.isImportEqualsDeclaration(st) && ts.isExternalModuleReference(st.moduleReference) && !st.isTypeOnly) {
      js = `var ${st.name.text} = require(${JSON.stringify(st.moduleReference.expression.text)});`;
    }
    if (js === null) continue;
    out += code.slice(pos, st.getStart(sf)) + js;
    pos = st.end;
  }
  return out + code.slice(pos);
}

// __execd_import gives the default and the namespace of a CommonJS or
// transpiled module, as TypeScript's esModuleInterop does.
function execdImport(spec) {
  const mod = require(spec);
  if (mod && mod.__esModule) return { default: mod.default, namespace: mod };
  return { default: mod, namespace: mod };
}

function transpile(code) {
  const out = ts.transpileModule(importsToRequires(code), {
    fileName: 'cell.ts',
    reportDiagnostics: true,
    compilerOptions: {
      target: ts.ScriptTarget.ES2022 || ts.ScriptTarget.ES2020,
      module: ts.ModuleKind.CommonJS,
      esModuleInterop: true,
    },
  });
  if (out.diagnostics && out.diagnostics.length) throw tsDiagnosticsError(out.diagnostics);
  return out.outputText;
}

async function evaluate(id, code) {
  current = id;
  try {
    if (ts) code = transpile(code);
    let value = compile(code).runInContext(context);
    if (value && typeof value.then === 'function') value = await value;
    if (value !== undefined) emit({ id, type: 'result', text: util.inspect(value) });
  } catch (e) {
    emit(errorEvent(id, e));
  }
  emit({ id, type: 'done' });
  current = null;
}

// Cells run one at a time, in arrival order.
let queue = Promise.resolve();
const rl = readline.createInterface({ input: process.stdin, terminal: false });
rl.on('line', (line) => {
  let req;
  try {
    req = JSON.parse(line);
  } catch (e) {
    return;
  }
  queue = queue.then(() => evaluate(req.id, req.code));
});
rl.on('close', () => process.exit(0));
process.on('uncaughtException', (e) => {
  if (current !== null) emit({ id: current, type: 'stderr', text: 'Uncaught ' + util.inspect(e) + '\n' });
});
process.on('unhandledRejection', (e) => {
  if (current !== null) emit({ id: current, type: 'stderr', text: 'Unhandled rejection: ' + util.inspect(e) + '\n' });
});
emit({ type: 'ready' });
