/**
 * The floor under what the gateway adds: a bare node:http reverse proxy in front of the emulator,
 * in its own process like the gateway. It forwards each request with the gateway's own upstream
 * client (undici's request API over a keep-alive pool) and pipes the answer back chunk by chunk,
 * with no authentication, rate limits, metering or parsing. Whatever one more Node hop costs on
 * this machine, it costs here too.
 */
import http from 'node:http';
import { Pool } from 'undici';
import { announceListening } from './child-output.js';

const upstream = new Pool(process.env.FLOOR_UPSTREAM!, { connections: 256 });

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    upstream
      .request({ method: 'POST', path: req.url!, headers: { authorization: req.headers.authorization!, 'content-type': 'application/json' }, body: Buffer.concat(chunks) })
      .then(async (answer) => {
        res.writeHead(answer.statusCode, { 'content-type': String(answer.headers['content-type'] ?? 'application/json') });
        for await (const chunk of answer.body) res.write(chunk);
        res.end();
      })
      .catch(() => res.destroy());
  });
});
announceListening(server, () => upstream.close());
