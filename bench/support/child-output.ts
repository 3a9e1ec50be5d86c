import type { ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

/**
 * The first JSON document a child process prints on stdout that has `field` (the emulator prints
 * its listening address and credentials pretty-printed); the rest of its output is then drained.
 */
export async function printedJson(child: ChildProcess, field: string): Promise<Record<string, any>> {
  let text = '';
  for await (const line of createInterface({ input: child.stdout! })) {
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
