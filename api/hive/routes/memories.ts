import type { HiveServices } from '../../../shared/composition/hive.js';
import { logEvent, recentEvents } from '../../../shared/hive/activity.js';
import { forgetMemory, getMemory, remember, updateMemory, verifyMemory } from '../../../shared/hive/memories.js';
import { recall } from '../../../shared/hive/recall.js';
import { eventsBody, forgetBody, logBody, memoryIdBody, memoryUpdateBody, recallBody, rememberBody } from '../../../shared/hive/schemas.js';
import { hiveRoute, type HiveRouteDefinition } from '../route-table.js';

/** Memories, recall and activity events. */
export function memoryRoutes(hive: HiveServices): HiveRouteDefinition[] {
  const { db } = hive;
  return [
    hiveRoute({
      method: 'post', path: '/v1/remember', summary: 'Store one memory; an existing identity is refined, never duplicated', access: 'credential', body: rememberBody,
      handle: async ({ res, body, credential }) => {
        const written = await remember(hive, credential, body);
        res.status(written.result === 'created' ? 201 : 200).json(written);
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/recall', summary: 'Ranked retrieval over the reachable nodes', access: 'credential', body: recallBody,
      handle: async ({ res, body, credential }) => {
        res.json(await recall(hive, credential, body));
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/memory/get', summary: 'One memory by id with provenance', access: 'credential', body: memoryIdBody,
      handle: async ({ res, body, credential }) => {
        res.json(await getMemory(db, credential, body.id));
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/memory/update', summary: "Edit one memory; renaming onto another memory's identity is refused", access: 'credential', body: memoryUpdateBody,
      handle: async ({ res, body, credential }) => {
        res.json(await updateMemory(hive, credential, body));
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/memory/forget', summary: 'Forget one memory, leaving a tombstone', access: 'credential', body: forgetBody,
      handle: async ({ res, body, credential }) => {
        res.json(await forgetMemory(db, credential, body));
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/memory/verify', summary: 'Mark a memory re-checked now', access: 'credential', body: memoryIdBody,
      handle: async ({ res, body, credential }) => {
        res.json(await verifyMemory(db, credential, body.id));
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/log', summary: 'Append an activity event to a node', access: 'credential', body: logBody,
      handle: async ({ res, body, credential }) => {
        res.status(201).json(await logEvent(db, credential, body));
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/events', summary: 'Recent activity events in the reach', access: 'credential', body: eventsBody,
      handle: async ({ res, body, credential }) => {
        res.json(await recentEvents(db, credential, body));
      },
    }),
  ];
}
