/**
 * The hive's client command: `npm run hive -- <command> [options]`. Human-readable output by
 * default, `--json` for agents (the server's answer as one JSON line; `login` prints a pending line
 * with the code first). A failure goes to stderr (`{"error", "status"}` with --json) with exit code
 * 1, a usage mistake with 2. The server is --server, else HIVE_URL, else the one logged in to; the
 * credential is HIVE_TOKEN, else the one saved by login or enrol ($HIVE_CONFIG_DIR or
 * ~/.config/svc-hive, mode 0600). docs/hive.md ("Client command") describes it.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { COMMANDS, type CommandContext } from './commands.js';
import { readCredentials, resolveServer, resolveToken } from './config.js';
import { ClientError } from './errors.js';
import { HiveHttp } from './http.js';

type Options = NonNullable<ParseArgsConfig['options']>;

const GLOBAL: Options = {
  server: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
};

const USAGE = `usage: npm run hive -- <command> [options] [--server URL] [--json]

${Object.values(COMMANDS).map((command) => `  ${command.usage}`).join('\n')}

  The server: --server, else HIVE_URL, else the one logged in to. The credential: HIVE_TOKEN, else
  the one saved by login or enrol in $HIVE_CONFIG_DIR (default ~/.config/svc-hive), mode 0600.`;

async function main(argv: string[]): Promise<number> {
  // A first, lenient pass finds the command wherever the global options stand.
  const every: Options = Object.assign({}, ...Object.values(COMMANDS).map((command) => command.options), GLOBAL);
  const loose = parseArgs({ args: argv, options: every, strict: false, allowPositionals: true });
  const json = loose.values.json === true;
  const name = loose.positionals[0];
  if (!name || name === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return name || loose.values.help ? 0 : 2;
  }
  const command = COMMANDS[name];
  if (!command) return fail(new ClientError(`Unknown command "${name}"; \`npm run hive -- help\` lists them.`, { usage: true }), json);

  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args: argv, options: { ...command.options, ...GLOBAL }, strict: true, allowPositionals: true });
  } catch (error) {
    return fail(new ClientError(`${(error as Error).message}\nusage: npm run hive -- ${command.usage}`, { usage: true }), json);
  }
  if (parsed.values.help) {
    process.stdout.write(`usage: npm run hive -- ${command.usage}\n`);
    return 0;
  }

  const env = process.env;
  const saved = await readCredentials(env);
  const server = () => resolveServer(parsed.values.server as string | undefined, saved, env);
  const context: CommandContext = {
    values: parsed.values,
    args: parsed.positionals.slice(parsed.positionals.indexOf(name) + 1),
    json,
    env,
    saved,
    server,
    api: () => new HiveHttp(server(), resolveToken(server(), saved, env)),
    anonymous: () => new HiveHttp(server(), null),
    withToken: (token) => new HiveHttp(server(), token),
    print(answer, human) {
      process.stdout.write(`${json ? JSON.stringify(answer) : human}\n`);
    },
    note(line) {
      if (!json) process.stderr.write(`${line}\n`);
    },
    stdout: process.stdout,
  };
  try {
    await command.run(context);
    return 0;
  } catch (error) {
    if (error instanceof ClientError) return fail(error, json);
    throw error;
  }
}

function fail(error: ClientError, json: boolean): number {
  if (json) process.stderr.write(`${JSON.stringify({ error: error.message, status: error.status })}\n`);
  else process.stderr.write(`hive: ${error.message}${error.status ? ` (HTTP ${error.status})` : ''}\n`);
  return error.usage ? 2 : 1;
}

process.exitCode = await main(process.argv.slice(2));
