import { createGatewayApp } from '../../api/app.js';
import { createHiveApp, hiveRouteTable } from '../../api/hive/app.js';
import { mountedRoutes } from '../support/mounted-routes.js';
import { signUp, startHiveWorld, type HiveOwner, type HiveWorld } from '../support/hive-world.js';
import { bearer, call, createDeveloper, createProvisioningKeyFor, type ApiResponse } from '../support/test-platform.js';
import { startWorkerProcess } from '../support/worker-process.js';
import { gatewayOperations, hiveOperations, type Operation } from './operations.js';

/**
 * The fixture world the fuzzer spoils requests in: a gateway (upstreams emulated) and a hive beside
 * it, a developer with a wallet deep enough for every case, and one real thing of each kind a path
 * names where making one is a single call, so a base request reaches the handler's lookup and past
 * it. A kind with no real one gets an id of its shape, which reaches the lookup and a 404.
 */
export interface FuzzWorld {
  operations: Operation[];
  /** The routes the two apps mount, but their browser pages. */
  mountedApiRoutes(): Array<Pick<Operation, 'server' | 'method' | 'path'>>;
  baseUrlOf(operation: Operation): string;
  credentialFor(operation: Operation): Promise<string | undefined>;
  pathValue(operation: Operation, name: string): string | undefined;
  fieldValue(operation: Operation, field: string): unknown;
  /** The credentials still work; a case that revoked or erased one is followed by a fresh one. */
  heal(): Promise<void>;
  healthy(): Promise<{ gateway: number; hive: number }>;
  /** Which path kinds have a real thing behind them (the rest 404 by design). */
  realKinds(): string[];
  close(): Promise<void>;
}

/** Browser pages behind a session cookie and a CSRF token (the consoles, the hive's sign-in form): test/hostile-input.test.ts sends them hostile forms. */
/** Models of the right kind where the chat model would be refused. */
const MODEL_OF: Record<string, string> = {
  '/v1/embeddings': 'text-embedding-3-small',
  '/v1/vector_stores': 'text-embedding-3-small',
  '/v1/rerank': 'svc:cohere/rerank-v3.5',
  '/v1/audio/speech': 'svc:openai/tts-1',
  '/v1/audio/transcriptions': 'svc:openai/whisper-1',
  '/v1/images/generations': 'svc:openai/gpt-image-1',
  '/v1/moderations': 'omni-moderation-latest',
};
let urls = 0;

const DASHBOARD = /^\/(app|dashboard|login)(\/|$)/;
/** Mounted beside the route table, so in neither description: Prometheus's scrape. */
const UNDESCRIBED: Operation[] = [{ server: 'gateway', method: 'get', path: '/metrics', credential: 'none', pathParams: [], query: {}, headers: {} }];
const MODEL = 'svc:openai/gpt-4o-mini';
/** An id of a kind's public shape that names nothing. */
const absent = (prefix: string) => `${prefix}${'A'.repeat(24)}`;
/** The same shape as a real id (a UUID's, a prefix's), naming nothing. */
const absentOf = (id: string) => id.replace(/[0-9A-Za-z]{6}$/, (tail) => tail.replace(/[0-9A-Za-z]/g, '0'));
/** Operations whose success takes the world's thing away: they aim at one of its shape that is not there. */
const DESTRUCTIVE = /^delete |\/(archive|revoke_all|cancel)$/;

/**
 * What a path parameter is, by the collection segment before it (`/v1/brains/{id}` is a brain),
 * tried with its parent first where the same word means two things (a thread's message, a
 * conversation's message). A path kind missing here fails the coverage test.
 */
const PATH_KINDS: Record<string, keyof Fixtures | { absent: string } | { literal: string }> = {
  accounts: 'accountId',
  assistants: 'assistantId',
  batches: { absent: 'batch_' },
  brains: 'brainId',
  'brains/entries': 'entryId',
  entities: { absent: 'ent_' },
  mounts: { absent: 'mnt_' },
  reindex: { absent: 'brj_' },
  customers: 'customerId',
  client_tokens: 'tokenJti',
  conversations: 'conversationId',
  'conversations/messages': { absent: 'msg_' },
  'threads/messages': 'threadMessageId',
  dynamic_profiles: { literal: 'fuzz-profile' },
  model_slots: { literal: 'fuzz-slot' },
  files: 'fileId',
  packs: { absent: 'pack_' },
  grants: 'granteeId',
  threads: 'threadId',
  runs: { absent: 'run_' },
  steps: { absent: 'step_' },
  vector_stores: 'vectorStoreId',
  file_batches: { absent: 'vsfb_' },
  migrations: { absent: 'vsmig_' },
  webhooks: 'webhookId',
  deliveries: { absent: 'whdel_' },
};

interface Fixtures {
  accountId: string;
  assistantId: string;
  brainId: string;
  entryId: string;
  customerId: string;
  tokenJti: string;
  conversationId: string;
  threadId: string;
  threadMessageId: string;
  fileId: string;
  granteeId: string;
  vectorStoreId: string;
  webhookId: string;
}

export function pathKindOf(path: string, name: string): string | undefined {
  const segments = path.split('/');
  const at = segments.indexOf(`{${name}}`);
  const collection = segments[at - 1];
  const parent = segments[at - 3];
  if (!collection) return undefined;
  const withParent = parent ? `${parent}/${collection}` : undefined;
  return withParent && withParent in PATH_KINDS ? withParent : collection in PATH_KINDS ? collection : undefined;
}

export async function startFuzzWorld(): Promise<FuzzWorld> {
  const world: HiveWorld = await startHiveWorld({
    WEBHOOK_ALLOW_PRIVATE_HOSTS: 'true',
    EDGE_RPM_LIMIT: '1000000',
    DEVELOPER_RPM_LIMIT: '1000000',
    // Configured, the Stripe webhook reads and verifies what it is sent (unconfigured it answers every request 503).
    HIVE_STRIPE_WEBHOOK_SECRET: 'whsec_fuzz',
  });
  const gateway = world.emulated.gateway;
  // The worker runs the workflows some routes wait on (a legal hold, a batch, a reindex), as under npm start.
  const worker = await startWorkerProcess(gateway.env);
  const openapi = (await call(gateway.baseUrl, '/v1/openapi.json')).body;
  const operations = [...gatewayOperations(openapi), ...UNDESCRIBED, ...hiveOperations(hiveRouteTable(world.hive))];

  let developer = await createDeveloper(gateway.platform, { creditMicros: 1_000_000_000_000 });
  let provisioningKey = await createProvisioningKeyFor(gateway.platform, developer.accountId);
  let owner: HiveOwner = await signUp(world, 'fuzz');
  let hiveIds = await hiveFixtures(world, owner);

  const expectOk = (what: string, response: ApiResponse) => {
    if (response.status >= 300) throw new Error(`fixture ${what}: ${response.status} ${response.text}`);
    return response.body;
  };
  const post = (path: string, json: unknown, key = developer.key) => call(gateway.baseUrl, path, { method: 'POST', json, headers: bearer(key) });

  async function gatewayFixtures(): Promise<Fixtures> {
    const brainId = expectOk('brain', await post('/v1/brains', { name: 'fuzz brain' })).id;
    const entry = expectOk('entry', await call(gateway.baseUrl, `/v1/brains/${brainId}/entries`, { method: 'PUT', json: { title: 'fuzz entry', body: 'what the fuzzer found' }, headers: bearer(developer.key) }));
    const customerId = expectOk('customer', await post('/v1/customers', { external_id: 'fuzz-customer' })).id;
    const token = expectOk('client token', await post(`/v1/customers/${customerId}/client_tokens`, { scope: ['conversations'] }));
    const conversation = expectOk('conversation', await post(`/v1/customers/${customerId}/conversations`, {}));
    const form = new FormData();
    form.set('purpose', 'assistants');
    form.set('file', new Blob(['fuzz file contents\n']), 'fuzz.txt');
    const file = expectOk('file', await call(gateway.baseUrl, '/v1/files', { method: 'POST', body: form, headers: bearer(developer.key) }));
    const assistant = expectOk('assistant', await post('/v1/assistants', { model: MODEL }));
    const thread = expectOk('thread', await post('/v1/threads', { messages: [{ role: 'user', content: 'hello' }] }));
    const messages = expectOk('thread messages', await call(gateway.baseUrl, `/v1/threads/${thread.id}/messages`, { headers: bearer(developer.key) }));
    const store = expectOk('vector store', await post('/v1/vector_stores', { name: 'fuzz store', embedding_model: 'text-embedding-3-small' }));
    const webhook = expectOk('webhook', await post('/v1/webhooks', { url: 'https://127.0.0.1:9/fuzz', events: ['wallet.low'] }));
    const account = expectOk('account', await post('/v1/accounts', { email: `fuzz-${Date.now()}@example.test`, username: `fuzz_${Date.now()}`, password: 'long fuzz password', funding: 'linked' }, provisioningKey));
    return {
      accountId: account.account.id,
      assistantId: assistant.id,
      brainId,
      entryId: entry.entry_id,
      customerId,
      tokenJti: token.jti ?? token.id,
      conversationId: conversation.id,
      threadId: thread.id,
      threadMessageId: messages.data[0].id,
      fileId: file.id,
      granteeId: developer.accountId,
      vectorStoreId: store.id,
      webhookId: webhook.id,
    };
  }
  let fixtures = await gatewayFixtures();

  /** Field values that carry the world's ids and names, by field name, so a body reaches its lookup. */
  function fieldValue(operation: Operation, field: string): unknown {
    if (operation.server === 'hive') {
      switch (field) {
        case 'node':
        case 'parent':
          return owner.rootPath;
        case 'nodes':
          return [owner.rootPath];
        case 'id':
          // Forgetting the world's memory would turn every later memory case into a 409.
          return operation.path === '/v1/task' ? hiveIds.taskId : operation.path.startsWith('/v1/memory/') && operation.path !== '/v1/memory/forget' ? hiveIds.memoryId : undefined;
        case 'session':
          return operation.path === '/v1/session/end' ? hiveIds.sessionId : undefined;
        case 'email':
          return operation.path === '/v1/signup' ? `fuzz-${Math.random().toString(36).slice(2)}@example.test` : owner.email;
        default:
          return undefined;
      }
    }
    switch (field) {
      case 'model':
        return MODEL_OF[operation.path] ?? MODEL;
      case 'input':
        return operation.path === '/v1/audio/speech' ? 'hello from the fuzzer' : operation.path === '/v1/embeddings' || operation.path === '/v1/moderations' ? 'hello' : undefined;
      case 'password':
        return 'a long fuzz password';
      case 'purpose':
        return operation.path === '/v1/files' ? 'assistants' : undefined;
      case 'endpoint':
        return operation.path === '/v1/batches' ? '/v1/chat/completions' : undefined;
      case 'url':
        return `https://127.0.0.1:9/fuzz-${++urls}`;
      case 'events':
        return operation.path === '/v1/webhooks' || operation.path === '/v1/webhook_endpoints' ? ['wallet.low'] : undefined;
      case 'completion_window':
        return operation.path === '/v1/batches' ? '24h' : undefined;
      case 'documents':
        return operation.path === '/v1/rerank' ? ['a fuzz document', 'another'] : undefined;
      case 'embedding_model':
        return 'text-embedding-3-small';
      case 'file_id':
      case 'input_file_id':
        return fixtures.fileId;
      case 'file_ids':
        return [fixtures.fileId];
      case 'assistant_id':
        return fixtures.assistantId;
      case 'vector_store_ids':
        return [fixtures.vectorStoreId];
      case 'brain_id':
        return fixtures.brainId;
      default:
        return undefined;
    }
  }

  function pathValue(operation: Operation, name: string): string | undefined {
    const kind = pathKindOf(operation.path, name);
    const source = kind ? PATH_KINDS[kind] : undefined;
    if (source === undefined) return undefined;
    // A case that deleted or archived the world's brain would leave every later case a 404.
    if (typeof source === 'string') return DESTRUCTIVE.test(`${operation.method} ${operation.path}`) ? absentOf(fixtures[source]) : fixtures[source];
    return 'absent' in source ? absent(source.absent) : source.literal;
  }

  return {
    operations,
    mountedApiRoutes: () => [
      ...mountedRoutes(createGatewayApp(gateway.platform)).map((route) => ({ server: 'gateway' as const, ...route })),
      ...mountedRoutes(createHiveApp(world.hive)).map((route) => ({ server: 'hive' as const, ...route })),
    ]
      .filter((route) => !DASHBOARD.test(route.path))
      .map((route) => ({ ...route, path: route.path.replace(/:(\w+)/g, '{$1}') })),
    baseUrlOf: (operation) => (operation.server === 'hive' ? world.baseUrl : gateway.baseUrl),
    async credentialFor(operation) {
      switch (operation.credential) {
        case 'developerKey':
          return `Bearer ${developer.key}`;
        case 'provisioningKey':
          return `Bearer ${provisioningKey}`;
        case 'hiveToken':
          // Revoking the credential a request came with is the route's whole point: it gets one of its own.
          return operation.path === '/v1/token/revoke' ? `Bearer ${expectOk('token', await world.post('/v1/token/create', owner.token, { node: owner.rootPath, role: 'reader', name: 'fuzz' })).token}` : `Bearer ${owner.token}`;
        case 'none':
          return undefined;
      }
    },
    pathValue,
    fieldValue,
    async heal() {
      const gatewayAlive = (await call(gateway.baseUrl, '/v1/brains', { headers: bearer(developer.key) })).status === 200;
      if (!gatewayAlive) {
        developer = await createDeveloper(gateway.platform, { creditMicros: 1_000_000_000_000 });
        provisioningKey = await createProvisioningKeyFor(gateway.platform, developer.accountId);
        fixtures = await gatewayFixtures();
      } else if ((await call(gateway.baseUrl, '/v1/accounts', { headers: bearer(provisioningKey) })).status !== 200) {
        provisioningKey = await createProvisioningKeyFor(gateway.platform, developer.accountId);
      }
      if ((await world.post('/v1/whoami', owner.token, {})).status !== 200) {
        owner = await signUp(world, `fuzz${Date.now()}`);
        hiveIds = await hiveFixtures(world, owner);
      }
    },
    async healthy() {
      return {
        gateway: (await call(gateway.baseUrl, '/v1/health')).status,
        hive: (await call(world.baseUrl, '/v1/health')).status,
      };
    },
    realKinds: () => Object.entries(PATH_KINDS).filter(([, source]) => typeof source === 'string').map(([kind]) => kind),
    async close() {
      await worker.stop();
      await world.close();
    },
  };
}

async function hiveFixtures(world: HiveWorld, owner: HiveOwner) {
  const remembered = await world.post('/v1/remember', owner.token, { node: owner.rootPath, title: 'fuzz memory', body: 'the fuzzer was here' });
  const task = await world.post('/v1/task', owner.token, { action: 'add', node: owner.rootPath, title: 'fuzz task' });
  const brief = await world.post('/v1/brief', owner.token, { node: owner.rootPath });
  for (const [what, response] of [['memory', remembered], ['task', task], ['brief', brief]] as const) {
    if (response.status >= 300) throw new Error(`hive fixture ${what}: ${response.status} ${response.text}`);
  }
  return { memoryId: remembered.body.id ?? remembered.body.memory?.id, taskId: task.body.id ?? task.body.task?.id, sessionId: brief.body.session?.id ?? brief.body.session };
}
