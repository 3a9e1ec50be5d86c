/**
 * The floor under every latency the HTTP benches print: a bare node:http server that reads the
 * body and answers `{"ok":true}`, in its own process like the API. Whatever this machine takes to
 * carry a request from the load generator to a Node process and back, it takes here too.
 */
import http from 'node:http';
import { announceListening } from './child-output.js';

const server = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    res.setHeader('content-type', 'application/json');
    res.end('{"ok":true}');
  });
});
announceListening(server);
