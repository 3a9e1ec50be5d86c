import type { Request } from 'express';
import { renderDevicePage, renderDocsPage, renderLlmsTxt, routeDocs } from '../route-docs.js';
import { hiveRoute, type HiveRouteDefinition } from '../route-table.js';

/**
 * Pages for people and agents with no credential: the device page and the docs, which are written
 * from `definitions`, the very table the API is mounted from (these routes included).
 */
export function pageRoutes(definitions: readonly HiveRouteDefinition[]): HiveRouteDefinition[] {
  return [
    hiveRoute({
      method: 'get', path: '/v1/device', summary: 'The page where a device code is typed and approved', access: 'public',
      handle: ({ res }) => {
        res.type('html').send(renderDevicePage());
      },
    }),
    hiveRoute({
      method: 'get', path: '/llms.txt', summary: 'These docs for an agent given only the server URL', access: 'public',
      handle: ({ req, res }) => {
        res.type('text/plain').send(renderLlmsTxt(originOf(req), routeDocs(definitions)));
      },
    }),
    hiveRoute({
      method: 'get', path: '/docs', summary: 'The full reference of the hive, for people', access: 'public',
      handle: ({ req, res }) => {
        res.type('html').send(renderDocsPage(originOf(req), routeDocs(definitions)));
      },
    }),
  ];
}

const originOf = (req: Request): string => `${req.protocol}://${req.get('host') ?? 'localhost'}`;
