/**
 * The floor under every latency the HTTP benches print: a bare node:http server that reads the
 * body and answers `{"ok":true}`, in its own process like the API. Whatever this machine takes to
 * carry a request from the load generator to a Node process and back, it takes here too.
 */
import http from 'node:http';

const server = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    res.setHeader('content-type', 'application/json');
    res.end('{"ok":true}');
  });
});
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as { port: number };
  process.stdout.write(`${JSON.stringify({ listening: `http://127.0.0.1:${port}` })}\n`);
});
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
