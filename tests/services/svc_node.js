// svc_node: a Node service for tests/e2e/test_services.py (docs/testing.md
// "Services"): 4 worker_threads gzip ROUNDS rounds each with zlib.gzipSync
// at level 1 (zlib's deflate_fast, and crc32_z over every input: the range
// is one of them, in node's own copy of zlib or in Debian's libz.so.1,
// whichever this node uses), sleeping 2 ms between rounds (Atomics.wait)
// until stdin ends (then flat out: the same work); the main thread prints a
// heartbeat once a second; at the end a checksum that depends only on
// ROUNDS.  Node 18 (Debian 12's nodejs) and later.
//
//     node svc_node.js [ROUNDS]    ready PID / beat N DONE/TOTAL / checksum HEX
'use strict';
const { Worker, isMainThread, parentPort, workerData } = require('worker_threads');
const crypto = require('crypto');
const zlib = require('zlib');

const WORKERS = 4, BUF_SIZE = 8192, CALLS = 1;
const M64 = (1n << 64n) - 1n;

function xorshift(x) {
  x ^= x << 13;
  x ^= x >>> 17;
  return (x ^ (x << 5)) >>> 0;
}

function work({ w, rounds, done, hurry }) {
  const counter = new BigInt64Array(done);
  const fast = new Int32Array(hurry);
  const nap = new Int32Array(new SharedArrayBuffer(4));
  const buf = Buffer.alloc(BUF_SIZE);
  const words = new Uint32Array(buf.buffer, buf.byteOffset, BUF_SIZE / 4);
  let h = 0xcbf29ce484222325n;
  for (let r = 0; r < rounds; r++) {
    // compressible bytes that depend on (w, r) only
    let x = (Math.imul(w + 1, 0x9e3779b1) ^ Math.imul(r + 1, 0x85ebca6b)) >>> 0 || 1;
    for (let i = 0; i < words.length; i++) {
      x = xorshift(x);
      words[i] = x & 0x0f0f0f0f;    // (the host's byte order: little-endian)
    }
    for (let c = 0; c < CALLS; c++) {
      const gz = zlib.gzipSync(buf.subarray(c), { level: 1 });
      const d = crypto.createHash('sha256').update(gz).digest().readBigUInt64LE(0);
      h = ((h ^ d) * 0x100000001b3n) & M64;
    }
    Atomics.add(counter, 0, 1n);
    if (!Atomics.load(fast, 0))
      Atomics.wait(nap, 0, 0, 2);
  }
  return h;
}

function main() {
  const arg = process.argv[2];
  const rounds = arg === undefined ? 3000 : Number(arg);
  if (!Number.isInteger(rounds) || rounds < 1) {
    process.stderr.write('usage: node svc_node.js [ROUNDS]\n');
    process.exit(2);
  }
  const done = new SharedArrayBuffer(8);
  const hurry = new SharedArrayBuffer(4);     // stdin has ended: no more sleeps
  process.stdin.on('data', () => {});
  process.stdin.on('end', () => Atomics.store(new Int32Array(hurry), 0, 1));
  const counter = new BigInt64Array(done);
  const res = new Array(WORKERS);
  let left = WORKERS;
  const start = Date.now();
  let beat = 1, timer = null;
  const tick = () => {
    process.stdout.write(`beat ${beat} ${Atomics.load(counter, 0)}/${rounds * WORKERS}\n`);
    beat++;
    timer = setTimeout(tick, Math.max(0, start + beat * 1000 - Date.now()));
  };
  for (let w = 0; w < WORKERS; w++) {
    const t = new Worker(__filename, { workerData: { w, rounds, done, hurry } });
    t.on('message', (h) => {
      res[w] = h;
      if (--left === 0) {
        clearTimeout(timer);
        let c = 0xcbf29ce484222325n;
        for (const v of res)
          c = ((c ^ v) * 0x100000001b3n) & M64;
        process.stdout.write(`checksum ${c.toString(16).padStart(16, '0')}\n`);
        process.exit(0);    // (stdin, still open, would keep the loop alive)
      }
    });
    t.on('error', (e) => { process.stderr.write(`worker ${w}: ${e.stack}\n`); process.exit(1); });
  }
  process.stdout.write(`ready ${process.pid}\n`);
  timer = setTimeout(tick, 1000);
}

if (isMainThread)
  main();
else
  parentPort.postMessage(work(workerData));
