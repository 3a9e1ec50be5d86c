import { startEmulatedGatewayWithDeveloper, type EmulatedGateway } from './emulated-gateway.js';
import type { TestDeveloper, TestPlatform } from './test-platform.js';
import { startWorkerProcess, type WorkerProcess } from './worker-process.js';

/**
 * A durability suite's world: an emulated gateway with `env`, a developer with `creditMicros`, and
 * the platform's worker in a process of its own, which the suite may kill and start again.
 */
export interface WorkerWorld {
  emulated: EmulatedGateway;
  gateway: TestPlatform;
  developer: TestDeveloper;
  worker: WorkerProcess;
  close(): Promise<void>;
}

export async function startWorkerWorld(env: Record<string, string>, creditMicros = 100_000_000): Promise<WorkerWorld> {
  const { emulated, gateway, developer } = await startEmulatedGatewayWithDeveloper(env, creditMicros);
  const world: WorkerWorld = {
    emulated,
    gateway,
    developer,
    worker: await startWorkerProcess(gateway.env),
    async close() {
      await world.worker.stop();
      await emulated.close();
    },
  };
  return world;
}
