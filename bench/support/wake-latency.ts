/**
 * How much a loopback round trip costs after its two processes slept: one HTTP request at a time
 * from this process to a bare node:http server in another, with 0, 1, 3 and 10 ms of idleness
 * between requests. On the development VM (cpuidle-haltpoll, which polls only 50 µs before halting
 * the virtual CPU) the same round trip took about twice as long after 10 ms of idleness as back to
 * back (README, Benchmarks), so a one-at-a-time measurement pays the VM's wake-up cost at every
 * process hop on its path.
 *
 * Run: node --import tsx bench/support/wake-latency.ts
 */
import { spawn } from 'node:child_process';
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import { printedJson, announceListening } from './child-output.js';
import { quantile } from './load.js';

if (process.argv[2] === 'server') {
  announceListening(http.createServer((req, res) => req.resume().on('end', () => res.end('ok'))));
} else {
  const server = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), 'server'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const { listening } = await printedJson(server, 'listening');
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const roundTrip = () =>
    new Promise<number>((resolve, reject) => {
      const started = performance.now();
      http.get(listening, { agent }, (res) => res.resume().on('end', () => resolve(performance.now() - started))).on('error', reject);
    });
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  for (let i = 0; i < 500; i++) await roundTrip(); // warm both sides
  const rows = [];
  for (const idleMs of [0, 1, 3, 10]) {
    const times: number[] = [];
    for (let i = 0; i < 500; i++) {
      if (idleMs > 0) await sleep(idleMs);
      times.push(await roundTrip());
    }
    times.sort((a, b) => a - b);
    rows.push({ 'idle between requests ms': idleMs, 'round trip p50 ms': quantile(times, 0.5).toFixed(3), 'p90 ms': quantile(times, 0.9).toFixed(3) });
  }
  console.table(rows);
  agent.destroy();
  server.kill();
}
