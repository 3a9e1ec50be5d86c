import { pino, type Logger } from 'pino';
import type { Config } from './config.js';

export type { Logger };

/** One JSON logger per process; children carry the request id or the component name. */
export function createLogger(config: Pick<Config, 'LOG_LEVEL'>, name: string): Logger {
  return pino({
    name,
    level: config.LOG_LEVEL,
    base: { process: name, pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    // Credentials and byok passphrases never reach a log line, even one that logs a whole request.
    redact: {
      paths: ['req.headers.authorization', 'req.headers.cookie', 'req.headers["svc-vector-store-key"]', 'req.body.passphrase', 'req.body.key.passphrase'],
      censor: '[redacted]',
    },
  });
}
