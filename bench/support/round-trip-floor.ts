/**
 * The floor under the hot path's design: a bare node:http server that makes, for every request,
 * the same three sequential inter-process round trips a metered call makes (a Lua script in
 * Redis, then two statements in PostgreSQL), each doing no work. What it takes is what the
 * machine charges for the round trips alone, before any authentication, limits or ledger.
 * Under REDIS_ONLY_PATH it makes only the first, all a busy payer's call on a quota grant made
 * before blocks of requests (a busy caller's call on a grant and a block now makes none).
 */
import http from 'node:http';
import { Redis } from 'ioredis';
import pg from 'pg';
import { announceListening } from './child-output.js';

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const db = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 10 });

/** The path bench/hot-path.ts loads for the Redis round trip alone. */
const REDIS_ONLY_PATH = '/redis-only';

const server = http.createServer((req, res) => {
  req.resume();
  req.on('end', async () => {
    try {
      await redis.eval('return 1', 0);
      if (req.url !== REDIS_ONLY_PATH) {
        await db.query({ name: 'floor-reserve', text: 'SELECT 1' });
        await db.query({ name: 'floor-settle', text: 'SELECT 2' });
      }
      res.setHeader('content-type', 'application/json');
      res.end('{"ok":true}');
    } catch {
      res.destroy();
    }
  });
});
announceListening(server, () => Promise.all([redis.quit(), db.end()]));
