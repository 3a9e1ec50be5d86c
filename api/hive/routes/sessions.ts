import type { HiveServices } from '../../../shared/composition/hive.js';
import { brief, endSession } from '../../../shared/hive/brief.js';
import { briefBody, sessionEndBody, taskBody, traitsBody } from '../../../shared/hive/schemas.js';
import { taskAction } from '../../../shared/hive/tasks.js';
import { traitsAction } from '../../../shared/hive/traits.js';
import { hiveRoute, type HiveRouteDefinition } from '../route-table.js';

/** Sessions and the work around them: briefs, session ends, tasks and the per-person user model. */
export function sessionRoutes(hive: HiveServices): HiveRouteDefinition[] {
  const { db } = hive;
  return [
    hiveRoute({
      method: 'post', path: '/v1/brief', summary: 'Session brief for a node (guardrails, preferences, pins, due tasks, inbox, recent activity) within a token budget, naming what it cut; opens a session', access: 'credential', body: briefBody,
      handle: async ({ res, body, credential }) => {
        res.json(await brief(db, credential, body));
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/session/end', summary: 'End a session: what its token wrote since the brief that opened it', access: 'credential', body: sessionEndBody,
      handle: async ({ res, body, credential }) => {
        res.json(await endSession(db, credential, body));
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/task', summary: 'Task operations by `action`: add, list, due, done, drop, snooze', access: 'credential', body: taskBody,
      handle: async ({ res, body, credential }) => {
        const answer = await taskAction(db, credential, body);
        res.status(body.action === 'add' ? 201 : 200).json(answer);
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/traits', summary: "The token's person's user model by `action`: list (the default), add a line with its evidence, drop a line", access: 'credential', body: traitsBody,
      handle: async ({ res, body, credential }) => {
        const answer = await traitsAction(db, credential, body);
        res.status(body.action === 'add' && 'result' in answer && answer.result === 'created' ? 201 : 200).json(answer);
      },
    }),
  ];
}
