import type { HiveServices } from '../../../shared/composition/hive.js';
import { approveEnrolment, claimEnrolment, enrolWithPassword, pendingEnrolments, requestEnrolment } from '../../../shared/hive/enrolment.js';
import { listMachines, renewMachine, revokeMachine } from '../../../shared/hive/machines.js';
import { enrolApproveBody, enrolBody, enrolClaimBody, enrolRequestBody, machineRenewBody, machineRevokeBody } from '../../../shared/hive/machine-schemas.js';
import { emptyBody } from '../../../shared/hive/schemas.js';
import { hiveRoute, type HiveRouteDefinition } from '../route-table.js';

/** Machines: enrolment (by password, or request, approve and claim), renewal by certificate, the list and revocation. */
export function machineRoutes(hive: HiveServices): HiveRouteDefinition[] {
  const { db } = hive;
  return [
    hiveRoute({
      method: 'post', path: '/v1/enrol', summary: 'Enrol a temporary machine (30 days) with a password and a certificate request: its certificate, token and the relay address', access: 'public', body: enrolBody,
      handle: async ({ req, res, body }) => {
        res.status(201).json(await enrolWithPassword(hive, body, req.ip ?? req.socket.remoteAddress ?? 'unknown'));
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/enrol/request', summary: 'Ask to enrol a machine permanently (grants nothing): a request id and a claim secret', access: 'public', body: enrolRequestBody,
      handle: async ({ req, res, body }) => {
        res.status(202).json(await requestEnrolment(hive, body, req.ip ?? req.socket.remoteAddress ?? 'unknown'));
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/enrol/claim', summary: 'Claim an approved enrolment: the permanent machine, its certificate and token (409 while pending)', access: 'public', body: enrolClaimBody,
      handle: async ({ res, body }) => {
        res.json(await claimEnrolment(hive, body));
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/enrol/pending', summary: "Waiting enrolment requests of the organisation's people (admin on the organisation)", access: 'credential', body: emptyBody,
      handle: async ({ res, credential }) => {
        res.json(await pendingEnrolments(hive, credential));
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/enrol/approve', summary: 'Admit a waiting enrolment permanently (admin on the organisation)', access: 'credential', body: enrolApproveBody,
      handle: async ({ res, body, credential }) => {
        res.json(await approveEnrolment(hive, credential, body));
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/machine/renew', summary: "Renew a permanent machine's certificate, authenticated by a proof signed with the current one (no token)", access: 'public', body: machineRenewBody,
      handle: async ({ res, body }) => {
        res.json(await renewMachine(hive, body));
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/machines', summary: "What is enrolled: the caller's machines, or the organisation's for its admins", access: 'credential', body: emptyBody,
      handle: async ({ res, credential }) => {
        res.json(await listMachines(db, credential));
      },
    }),
    hiveRoute({
      method: 'post', path: '/v1/machines/revoke', summary: 'Revoke a machine (by id or name) and its token; its name is retired for good', access: 'credential', body: machineRevokeBody,
      handle: async ({ res, body, credential }) => {
        res.json(await revokeMachine(db, credential, body.machine));
      },
    }),
  ];
}
