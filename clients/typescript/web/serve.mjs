// Serves the pay-a-bill page (web/index.html, web/dist/app.js) and proxies the API to API_URL,
// so the page and the API share one origin and no CORS is needed. Node's own modules only.
//
//   API_URL=http://127.0.0.1:8787 LISTEN_ADDR=127.0.0.1:8788 node web/serve.mjs
//
// `/v1/*` and `/healthz` are streamed to API_URL both ways: method, path and query, every
// request header but Host and the hop-by-hop ones (so Authorization, Idempotency-Key, Prefer,
// Content-Type pass), the body; then the status, the response headers (Retry-After,
// Idempotent-Replayed, Preference-Applied, Location, Content-Type, …) and the body. A client
// that hangs up ends the forwarded request too, as it would at the edge. When API_URL cannot
// be reached the reply is a 502 problem, like the edge's `backend-unreachable`.
//
// LISTEN_ADDR is host:port (default 127.0.0.1:8788; port 0 picks a free one). Once listening it
// prints one line, `web listening on http://HOST:PORT` (as the backend and the bank simulator print theirs). SIGTERM (or SIGINT) closes it.
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';

const API_URL = new URL(process.env.API_URL ?? 'http://127.0.0.1:8787');
const { host, port } = parseListenAddr(process.env.LISTEN_ADDR ?? '127.0.0.1:8788');
const WEB_DIR = new URL('./', import.meta.url);

/** The page's files, by request path. */
const FILES = new Map([
  ['/', { file: 'index.html', type: 'text/html; charset=utf-8' }],
  ['/index.html', { file: 'index.html', type: 'text/html; charset=utf-8' }],
  ['/dist/app.js', { file: 'dist/app.js', type: 'text/javascript; charset=utf-8' }],
  ['/dist/app.js.map', { file: 'dist/app.js.map', type: 'application/json' }],
]);

/** Headers about one connection (RFC 9110 §7.6.1), never passed on by a proxy. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/** The page may load only its own script and talk only to its own origin. */
const PAGE_HEADERS = {
  'cache-control': 'no-store',
  'content-security-policy': [
    "default-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; '),
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
};

function parseListenAddr(text) {
  const match = /^(?:\[([^\]]+)\]|([^:]+)):([0-9]+)$/.exec(text);
  if (match === null) {
    console.error(`web: LISTEN_ADDR must be host:port, not ${JSON.stringify(text)}`);
    process.exit(2);
  }
  return { host: match[1] ?? match[2], port: Number(match[3]) };
}

function isApiPath(path) {
  return path.startsWith('/v1/') || path === '/healthz';
}

const server = http.createServer((request, response) => {
  const path = new URL(request.url ?? '/', 'http://page').pathname;
  if (isApiPath(path)) {
    forward(request, response);
  } else {
    servePage(path, request, response).catch((error) => {
      console.error(`web: ${path}: ${error.message}`);
      if (!response.headersSent) {
        response.writeHead(500, { 'content-type': 'text/plain' });
      }
      response.end('internal error\n');
    });
  }
});

async function servePage(path, request, response) {
  const entry = FILES.get(path);
  if (entry === undefined) {
    response.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' });
    response.end('not found\n');
    return;
  }
  if (request.method !== 'GET' && request.method !== 'HEAD') {
    response.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain; charset=utf-8' });
    response.end('method not allowed\n');
    return;
  }
  let body;
  try {
    body = await readFile(new URL(entry.file, WEB_DIR));
  } catch (error) {
    if (error.code !== 'ENOENT') {
      throw error;
    }
    response.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' });
    response.end(`${entry.file} is missing: run \`npm run build:web\` first\n`);
    return;
  }
  response.writeHead(200, {
    ...PAGE_HEADERS,
    'content-type': entry.type,
    'content-length': body.length,
  });
  response.end(request.method === 'HEAD' ? undefined : body);
}

/** Streams `request` to API_URL and its reply back. */
function forward(request, response) {
  const target = new URL(request.url ?? '/', API_URL);
  const headers = {};
  for (const [name, value] of Object.entries(request.headers)) {
    if (name !== 'host' && !HOP_BY_HOP.has(name)) {
      headers[name] = value;
    }
  }
  const transport = target.protocol === 'https:' ? https : http;
  const upstream = transport.request(target, { method: request.method, headers });

  upstream.on('response', (reply) => {
    const replyHeaders = {};
    for (const [name, value] of Object.entries(reply.headers)) {
      if (!HOP_BY_HOP.has(name) && value !== undefined) {
        replyHeaders[name] = value;
      }
    }
    response.writeHead(reply.statusCode ?? 502, reply.statusMessage, replyHeaders);
    reply.pipe(response);
    reply.on('error', () => response.destroy());
  });
  upstream.on('error', (error) => {
    if (response.headersSent) {
      // Cut off mid-reply: the client sees a broken response, as it would at the edge.
      response.destroy();
      return;
    }
    if (response.destroyed) {
      return;
    }
    const problem = JSON.stringify({
      type: '/problems/backend-unreachable',
      title: 'The payments service could not be reached',
      status: 502,
      detail:
        `The page's server could not reach ${API_URL.origin} (${error.code ?? error.message}). ` +
        'Retrying is safe: a payment retried with the same Idempotency-Key and body is never ' +
        'done twice.',
    });
    response.writeHead(502, {
      'content-type': 'application/problem+json',
      'content-length': Buffer.byteLength(problem),
      'retry-after': '1',
    });
    response.end(problem);
  });
  // The client hung up before the whole reply was sent: end the forwarded request too.
  response.on('close', () => {
    if (!response.writableFinished) {
      upstream.destroy();
    }
  });
  request.pipe(upstream);
}

server.listen(port, host, () => {
  const address = server.address();
  const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  console.log(`web listening on http://${shown}:${address.port}`);
});
server.on('error', (error) => {
  console.error(`web: ${error.message}`);
  process.exit(1);
});

function stop() {
  server.close(() => process.exit(0));
  server.closeAllConnections();
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
