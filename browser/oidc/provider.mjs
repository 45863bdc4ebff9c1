// A real OpenID Provider for mnemo's single sign-on tests: the certified `oidc-provider` package,
// on 127.0.0.1 at an ephemeral port, with its own users, a `groups` claim and RS256 signing keys.
//
//   node browser/oidc/provider.mjs '{"client_id": "...", "client_secret": "...",
//       "redirect_uris": ["http://127.0.0.1:PORT/console/oidc/callback"],
//       "users": {"alice": {"email": "...", "name": "...", "groups": ["eng"]}}}'
//
// It prints one line, `{"issuer": "http://127.0.0.1:PORT"}`, once it listens, and serves until
// killed. Sign-in uses oidc-provider's development login page (any password; the login is the
// account id); consent is granted for the one client without asking.
//
// Test-only controls, under /test/ on the same port (a real provider has nothing like them):
//   POST /test/client  {"redirect_uris": [...]}  the client's redirect URIs (once mnemo's port is known)
//   POST /test/users   {"id", "email", "name", "groups"}  adds or changes a user (their groups
//                      apply from their next sign-in on)
//   POST /test/rotate  a new signing key replaces the current one, which leaves the JWKS
//   POST /test/mint    {"claims": {...}, "key": "current"|"retired"|"stranger", "alg": "RS256"|
//                      "HS256-public"|"none", "kid": "..."} a token signed as asked (for the hostile
//                      token list); claims default to a valid ID token of user `sub` for the client
//
// Installed with its lockfile into target/browser-oidc by scripts/test (npm ci), and run from
// there: NODE_PATH is not used, so run it as `node target/browser-oidc/provider.mjs`.

import http from 'node:http';
import { createHmac, randomBytes } from 'node:crypto';

import Provider from 'oidc-provider';
import * as jose from 'jose';

const config = JSON.parse(process.argv[2] ?? '{}');
const users = new Map(Object.entries(config.users ?? {}));

async function newKey() {
  const { privateKey, publicKey } = await jose.generateKeyPair('RS256', { extractable: true });
  const kid = randomBytes(8).toString('hex');
  const privateJwk = { ...(await jose.exportJWK(privateKey)), kid, alg: 'RS256', use: 'sig' };
  const publicJwk = { ...(await jose.exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' };
  return { kid, privateKey, privateJwk, publicJwk };
}

let current = await newKey();
let retired = null;
const stranger = await newKey();
const cookieKey = randomBytes(32).toString('hex');

const server = http.createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
// `issuer_host` "localhost" makes the provider another site than mnemo on 127.0.0.1, so the
// redirect back is cross-site as in production (a SameSite=Strict cookie would not come back).
const issuer = `http://${config.issuer_host ?? '127.0.0.1'}:${server.address().port}`;

function build() {
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: config.client_id,
        client_secret: config.client_secret,
        redirect_uris: config.redirect_uris,
        grant_types: ['authorization_code'],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_basic',
      },
    ],
    jwks: { keys: [current.privateJwk] },
    cookies: { keys: [cookieKey] },
    claims: {
      openid: ['sub'],
      email: ['email', 'email_verified'],
      profile: ['name', 'groups'],
    },
    // The ID token carries the scopes' claims too (groups among them), as most company providers
    // are configured to do; mnemo also reads the userinfo endpoint.
    conformIdTokenClaims: false,
    features: { devInteractions: { enabled: true } },
    pkce: { required: () => true },
    ttl: { AccessToken: 3600, AuthorizationCode: 60, IdToken: 3600, Grant: 3600, Interaction: 600, Session: 3600 },
    async findAccount(ctx, id) {
      const user = users.get(id);
      if (!user) return undefined;
      return {
        accountId: id,
        async claims() {
          const u = users.get(id) ?? user;
          return { sub: id, email: u.email, email_verified: true, name: u.name, groups: u.groups ?? [] };
        },
      };
    },
    // The client is first-party here: no consent page.
    async loadExistingGrant(ctx) {
      const grantId =
        ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
      if (grantId) {
        const grant = await ctx.oidc.provider.Grant.find(grantId);
        if (grant) return grant;
      }
      const grant = new ctx.oidc.provider.Grant({
        clientId: ctx.oidc.client.clientId,
        accountId: ctx.oidc.session.accountId,
      });
      grant.addOIDCScope('openid email profile');
      await grant.save();
      return grant;
    },
  });
  return provider;
}

let provider = build();

async function readJson(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : {};
}

function b64(value) {
  return Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');
}

async function mint({ claims = {}, key = 'current', alg = 'RS256', kid }) {
  const now = Math.floor(Date.now() / 1000);
  const body = { iss: issuer, aud: config.client_id, sub: 'alice', iat: now, exp: now + 600, ...claims };
  for (const [k, v] of Object.entries(body)) if (v === null) delete body[k];
  const signer = { current, retired, stranger }[key];
  if (!signer) throw new Error(`no ${key} key`);
  const header = { alg, kid: kid ?? signer.kid, typ: 'JWT' };
  if (alg === 'none') {
    return `${b64({ alg: 'none', typ: 'JWT' })}.${b64(body)}.`;
  }
  if (alg === 'HS256-public') {
    // The classic confusion attack: HMAC keyed with the provider's published public key.
    header.alg = 'HS256';
    const input = `${b64(header)}.${b64(body)}`;
    const secret = JSON.stringify(signer.publicJwk);
    return `${input}.${createHmac('sha256', secret).update(input).digest('base64url')}`;
  }
  return new jose.SignJWT(body).setProtectedHeader(header).sign(signer.privateKey);
}

server.on('request', async (req, res) => {
  if (req.url.startsWith('/test/') && req.method === 'POST') {
    try {
      const body = await readJson(req);
      let answer = {};
      if (req.url === '/test/client') {
        config.redirect_uris = body.redirect_uris;
        provider = build();
      } else if (req.url === '/test/users') {
        users.set(body.id, { email: body.email, name: body.name, groups: body.groups ?? [] });
      } else if (req.url === '/test/rotate') {
        retired = current;
        current = await newKey();
        provider = build();
        answer = { kid: current.kid, retired_kid: retired.kid };
      } else if (req.url === '/test/mint') {
        answer = { token: await mint(body) };
      } else {
        res.writeHead(404).end();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
    } catch (e) {
      res.writeHead(400, { 'content-type': 'text/plain' }).end(String(e));
    }
    return;
  }
  provider.callback()(req, res);
});

process.stdout.write(`${JSON.stringify({ issuer })}\n`);
