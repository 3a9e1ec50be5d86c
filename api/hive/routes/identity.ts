import type { HiveServices } from '../../../shared/composition/hive.js';
import { createNode, listReachableNodes } from '../../../shared/hive/nodes.js';
import { approveDevice, createGrantToken, pollDevice, revokeOwnToken, setPassword, signup, startDeviceFlow, whoami } from '../../../shared/hive/people.js';
import { deviceApproveBody, devicePollBody, emptyBody, nodeCreateBody, passwordBody, signupBody, tokenCreateBody } from '../../../shared/hive/schemas.js';
import { hiveRoute, type HiveRouteDefinition } from '../route-table.js';

/** Organisations, nodes, people and their credentials. */
export function identityRoutes(hive: HiveServices): HiveRouteDefinition[] {
  const { db } = hive;
  return [
    // Only a server started with the signup option serves it (nor do /llms.txt and /docs list it otherwise): closed, it is an unknown path.
    ...(hive.config.HIVE_SIGNUP_ENABLED
      ? [
          hiveRoute({
            method: 'post', path: '/v1/signup', summary: 'Create an organisation and its owner (only when the server runs with HIVE_SIGNUP_ENABLED)', access: 'public', body: signupBody,
            handle: async ({ req, res, body }) => {
              res.status(201).json(await signup(hive, body, req.ip ?? req.socket.remoteAddress ?? 'unknown'));
            },
          }),
        ]
      : []),
    hiveRoute({
      method: 'post', path: '/v1/device/start', summary: 'Start the device flow: a device code to poll with and a user code to show', access: 'public', body: emptyBody,
      handle: async ({ res }) => {
        res.json(await startDeviceFlow(hive));
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/device/poll', summary: 'Poll a device code: pending, or the token once approved', access: 'public', body: devicePollBody,
      handle: async ({ res, body }) => {
        res.json(await pollDevice(db, body.device_code));
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/device/approve', summary: 'Admit a person: code, email, node, role and optional guardrail / axiom authority', access: 'credential', body: deviceApproveBody,
      handle: async ({ res, body, credential }) => {
        res.json(await approveDevice(db, credential, body));
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/password', summary: "Set the password of the token's person", access: 'credential', body: passwordBody,
      handle: async ({ res, body, credential }) => {
        res.json(await setPassword(db, credential, body.password));
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/token/create', summary: 'Mint a token carrying a grant of its own (a node and a role)', access: 'credential', body: tokenCreateBody,
      handle: async ({ res, body, credential }) => {
        res.status(201).json(await createGrantToken(db, credential, body));
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/token/revoke', summary: 'Revoke the credential the request arrived with', access: 'credential', body: emptyBody,
      handle: async ({ res, credential }) => {
        res.json(await revokeOwnToken(db, credential));
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/whoami', summary: 'The credential: its organisation, person and grants', access: 'credential', body: emptyBody,
      handle: async ({ res, credential }) => {
        res.json(await whoami(db, credential));
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/nodes', summary: 'The part of the tree the credential reaches', access: 'credential', body: emptyBody,
      handle: async ({ res, credential }) => {
        res.json(await listReachableNodes(db, credential));
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/nodes/create', summary: 'Create a node under one the credential administers', access: 'credential', body: nodeCreateBody,
      handle: async ({ res, body, credential }) => {
        res.status(201).json(await createNode(db, credential, body));
      },
    }),
  ];
}
