import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ClientError } from './errors.js';

/**
 * Where the client keeps what it holds: one credentials file (mode 0600, in a directory of mode
 * 0700) under $HIVE_CONFIG_DIR, or ~/.config/svc-hive. It holds the server it was obtained from,
 * the token, who it is, and after `enrol` the machine with its private key and certificate.
 */
export interface SavedMachine {
  id: string;
  name: string;
  kind: string;
  expires_at: string | null;
  /** PKCS#8 PEM of the key the certificate was issued for; never leaves this file. */
  private_key: string;
  certificate: string;
  ca_certificate: string;
  relay: string;
}

export interface SavedCredentials {
  server: string;
  token: string;
  token_id: string | null;
  /** How the token was obtained: the device flow or a machine's enrolment. */
  via: 'login' | 'enrol';
  person: { id: string; email: string } | null;
  organisation: { id: string; name: string } | null;
  saved_at: string;
  machine: SavedMachine | null;
}

export function configDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.HIVE_CONFIG_DIR || path.join(os.homedir(), '.config', 'svc-hive');
}

export function credentialsFile(env: NodeJS.ProcessEnv = process.env): string {
  return path.join(configDir(env), 'credentials.json');
}

export async function readCredentials(env: NodeJS.ProcessEnv = process.env): Promise<SavedCredentials | null> {
  const file = credentialsFile(env);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
  try {
    return JSON.parse(text) as SavedCredentials;
  } catch {
    throw new ClientError(`${file} is not valid JSON; remove it and log in again.`);
  }
}

/**
 * Writes the file whole and atomically (a temporary file of mode 0600 renamed over it), so a
 * reader never sees half a file and the key is never readable by others, not even for a moment.
 */
export async function saveCredentials(credentials: SavedCredentials, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  const dir = configDir(env);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const file = credentialsFile(env);
  const temporary = `${file}.${process.pid}.tmp`;
  await writeFile(temporary, `${JSON.stringify(credentials, null, 2)}\n`, { mode: 0o600 });
  // The mode given to writeFile is masked by the umask; say it again, exactly.
  await chmod(temporary, 0o600);
  await rename(temporary, file);
  return file;
}

/** The server's origin without a trailing slash, so a saved URL and a given one compare equal. */
export function normaliseServer(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ClientError(`"${url}" is not a URL (expected something like http://127.0.0.1:8090).`, { usage: true });
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new ClientError(`"${url}" is not an http(s) URL.`, { usage: true });
  return `${parsed.origin}${parsed.pathname.replace(/\/+$/, '')}`;
}

/** --server, else HIVE_URL, else the server of the saved credentials. */
export function resolveServer(flag: string | undefined, saved: SavedCredentials | null, env: NodeJS.ProcessEnv = process.env): string {
  const chosen = flag || env.HIVE_URL || saved?.server;
  if (!chosen) throw new ClientError('No hive server: pass --server <url>, set HIVE_URL, or log in first.', { usage: true });
  return normaliseServer(chosen);
}

/**
 * The token to send to `server`: HIVE_TOKEN (an agent's or CI's grant token), else the saved one,
 * but only to the server it came from: a token is never sent to another server because a flag
 * pointed elsewhere.
 */
export function resolveToken(server: string, saved: SavedCredentials | null, env: NodeJS.ProcessEnv = process.env): string {
  if (env.HIVE_TOKEN) return env.HIVE_TOKEN;
  if (!saved) throw new ClientError(`Not logged in: run \`npm run hive -- login --server ${server}\` (or set HIVE_TOKEN).`);
  if (normaliseServer(saved.server) !== server) {
    throw new ClientError(`The saved credential is for ${saved.server}, not ${server}; log in to ${server} (with another HIVE_CONFIG_DIR to keep both).`);
  }
  return saved.token;
}
