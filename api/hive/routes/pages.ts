import type { Request } from 'express';
import { renderDevicePage, renderDocsPage, renderLlmsTxt, routeDocs } from '../route-docs.js';
import { hiveRoute, type HiveRouteDefinition } from '../route-table.js';
import { pageSecurityPolicy } from '../views/html.js';
import { homePage, signupPage } from '../views/pages.js';

/**
 * Pages for people and agents with no credential: the front page, signup, the device page and the
 * docs, which are written from `definitions`, the very table the API is mounted from (these routes
 * included). The signup page is served only where POST /v1/signup is.
 */
export function pageRoutes(definitions: readonly HiveRouteDefinition[]): HiveRouteDefinition[] {
  const signupOpen = definitions.some((definition) => definition.path === '/v1/signup');
  return [
    hiveRoute({
      method: 'get', path: '/', summary: 'What this server is, with the way to sign in, sign up and approve a device', access: 'public',
      handle: ({ res }) => {
        res.setHeader('Content-Security-Policy', pageSecurityPolicy([]));
        res.type('html').send(homePage({ signupOpen }));
      },
    }),
    ...(signupOpen
      ? [
          hiveRoute({
            method: 'get', path: '/signup', summary: 'The page that creates an organisation and its owner (with POST /v1/signup)', access: 'public',
            handle: ({ res }) => {
              res.setHeader('Content-Security-Policy', pageSecurityPolicy([]));
              res.type('html').send(signupPage());
            },
          }),
        ]
      : []),
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
