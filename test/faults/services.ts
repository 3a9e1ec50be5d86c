import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, createWriteStream, existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { isPortOpen, startTemporalDevServer, stopChild, type TemporalDevServer } from '../../scripts/lib/local-services.js';

/**
 * Backing services of the fault suite's own, which it stops and starts: a PostgreSQL cluster made
 * with initdb, a Redis server and a Temporal dev server, each on a port of its own. The rest of the
 * test suite keeps the machine's PostgreSQL and Redis and never sees these go away.
 */
const run = promisify(execFile);

/** The PostgreSQL binaries of the machine's newest installed major version (Debian's layout), where ensure-deps.sh built pgvector. */
function postgresBin(name: string): string {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).filter((entry) => existsSync(path.join(root, entry, 'bin', 'initdb'))) : [];
  const newest = versions.sort((a, b) => Number(b) - Number(a))[0];
  if (!newest) throw new Error(`no PostgreSQL server binaries under ${root}`);
  return path.join(root, newest, 'bin', name);
}

/** initdb and pg_ctl refuse to run as root; as root they run as the postgres user, who owns the cluster. */
const asRoot = process.getuid?.() === 0;
function runPostgresTool(name: string, args: string[]): Promise<{ stdout: string }> {
  const [command, commandArgs] = asRoot ? ['runuser', ['-u', 'postgres', '--', postgresBin(name), ...args]] : [postgresBin(name), args];
  return run(command, commandArgs, { maxBuffer: 1 << 22 });
}

export class OwnPostgres {
  private constructor(
    readonly dataDir: string,
    readonly port: number,
  ) {}

  /** A new cluster in `dir` (trust authentication, durability off: it lives for one test run). */
  static async create(dir: string, port: number): Promise<OwnPostgres> {
    mkdirSync(dir, { recursive: true });
    if (asRoot) chownSync(dir, ...postgresIds());
    await runPostgresTool('initdb', ['-D', dir, '-U', 'postgres', '-A', 'trust', '--no-sync', '-E', 'UTF8']);
    writeFileSync(
      path.join(dir, 'postgresql.auto.conf'),
      [`port = ${port}`, `listen_addresses = '127.0.0.1'`, `unix_socket_directories = ''`, 'fsync = off', 'synchronous_commit = off', 'full_page_writes = off', 'shared_buffers = 128MB', 'huge_pages = off', 'max_connections = 200'].join('\n') + '\n',
    );
    if (asRoot) chownSync(path.join(dir, 'postgresql.auto.conf'), ...postgresIds());
    const postgres = new OwnPostgres(dir, port);
    await postgres.start();
    return postgres;
  }

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/svc_faults`;
  }

  async start(): Promise<void> {
    await runPostgresTool('pg_ctl', ['-D', this.dataDir, '-l', path.join(this.dataDir, 'server.log'), '-w', '-t', '60', 'start']);
  }

  /** A fast stop: every session is ended at once, as a crashed or restarted server ends them. */
  async stop(): Promise<void> {
    await runPostgresTool('pg_ctl', ['-D', this.dataDir, '-m', 'fast', '-w', '-t', '60', 'stop']);
  }

  async destroy(): Promise<void> {
    await runPostgresTool('pg_ctl', ['-D', this.dataDir, '-m', 'immediate', '-w', 'stop']).catch(() => undefined);
  }
}

function postgresIds(): [number, number] {
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres']).toString().trim());
  return [id('-u'), id('-g')];
}

/** A Redis that keeps nothing on disk: stopped and started again, it is empty, as the local one is after a restart. */
export class OwnRedis {
  private process: ChildProcess | undefined;

  constructor(
    readonly port: number,
    private readonly logFile: string,
  ) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Pauses (SIGSTOP) or resumes (SIGCONT) the server: paused, it keeps its connections open and answers nothing. */
  signal(signal: 'SIGSTOP' | 'SIGCONT'): void {
    this.process?.kill(signal);
  }

  async start(): Promise<void> {
    const log = createWriteStream(this.logFile, { flags: 'a' });
    const child = spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.pipe(log);
    child.stderr.pipe(log);
    this.process = child;
    const deadline = Date.now() + 20_000;
    while (!(await isPortOpen(this.port))) {
      if (child.exitCode !== null || Date.now() > deadline) throw new Error(`Redis did not listen on ${this.port}; see ${this.logFile}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  async stop(): Promise<void> {
    if (this.process) await stopChild(this.process, 5_000);
    this.process = undefined;
  }
}

/** The Temporal dev server with its history in a file, so a restart keeps every workflow. */
export class OwnTemporal {
  private server: TemporalDevServer | undefined;

  constructor(
    readonly port: number,
    private readonly dbFile: string,
    private readonly logFile: string,
  ) {}

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    this.server = await startTemporalDevServer({ port: this.port, dbFile: this.dbFile, logFile: this.logFile });
  }

  async stop(): Promise<void> {
    if (this.server) await stopChild(this.server.process, 15_000);
    this.server = undefined;
  }
}
