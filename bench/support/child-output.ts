import type { ChildProcess } from 'node:child_process';
import type { Server } from 'node:http';
import { createInterface } from 'node:readline';

/**
 * The first JSON document a child process prints on stdout that has `field` (the emulator prints
 * its listening address and credentials pretty-printed); the rest of its output is then drained.
 */
export async function printedJson(child: ChildProcess, field: string): Promise<Record<string, any>> {
  let text = '';
  for await (const line of createInterface({ input: child.stdout! })) {
    // Lines outside a document (a V8 trace flag's output, say) are not what we wait for.
    if (text === '' && !line.trimStart().startsWith('{')) continue;
    text += line;
    try {
      const parsed = JSON.parse(text) as Record<string, any>;
      if (parsed[field]) {
        child.stdout!.resume();
        return parsed;
      }
      text = '';
    } catch {
      // a pretty-printed document continues on the next line
    }
  }
  throw new Error(`process exited before printing ${field}`);
}

/**
 * The child side of printedJson for a bench's bare servers: listens on a free loopback port,
 * prints `{"listening": url}`, and on SIGTERM closes its connections, then `cleanup`, and exits.
 */
export function announceListening(server: Server, cleanup: () => Promise<unknown> = async () => undefined): void {
  server.listen(0, '127.0.0.1', () => {
    const { port } = server.address() as { port: number };
    process.stdout.write(`${JSON.stringify({ listening: `http://127.0.0.1:${port}` })}\n`);
  });
  process.on('SIGTERM', () => {
    server.closeAllConnections();
    server.close(() => void cleanup().then(() => process.exit(0)));
  });
}
