// execd's JavaScript driver: evaluates cells in one persistent vm context.
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

async function evaluate(id, code) {
  current = id;
  try {
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
