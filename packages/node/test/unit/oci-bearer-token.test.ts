import { describe, expect, it } from 'vitest';
import { parseTokenResponse, tokenRealm, tokenRequest } from '../../src/image/oci/bearer-token.js';

const bearer = (params: Record<string, string>) => ({ scheme: 'bearer', params });
const PULL = 'repository:app:pull';

describe('bearer token requests', () => {
  it('follows only an http(s) realm', () => {
    expect(tokenRealm('r.test', bearer({ realm: 'https://auth.test/token' })).href).toBe(
      'https://auth.test/token',
    );
    expect(() => tokenRealm('r.test', bearer({}))).toThrow(/registry r.test: bearer challenge without realm/);
    expect(() => tokenRealm('r.test', bearer({ realm: 'not a url' }))).toThrow(/bad token realm not a url/);
    expect(() => tokenRealm('r.test', bearer({ realm: 'file:///etc/passwd' }))).toThrow(/bad token realm/);
  });

  it('asks anonymously by GET for the pull scope and those the challenge names, once each', () => {
    const challenge = bearer({
      realm: 'https://auth.test/token?x=1',
      service: 'reg',
      scope: `${PULL} other:x`,
    });
    const req = tokenRequest(tokenRealm('r.test', challenge), challenge, PULL, undefined);
    expect(req.init).toEqual({ headers: {} });
    expect(req.url.origin + req.url.pathname).toBe('https://auth.test/token');
    expect([...req.url.searchParams]).toEqual([
      ['x', '1'],
      ['service', 'reg'],
      ['scope', PULL],
      ['scope', 'other:x'],
    ]);
  });

  it('sends a user name and password as basic auth, naming the account', () => {
    const challenge = bearer({ realm: 'http://auth.test/t' });
    const req = tokenRequest(tokenRealm('r.test', challenge), challenge, PULL, {
      username: 'u',
      password: 'p',
    });
    expect(req.init.headers).toEqual({ authorization: `Basic ${Buffer.from('u:p').toString('base64')}` });
    expect(req.url.searchParams.get('account')).toBe('u');
    expect(req.url.searchParams.has('service')).toBe(false);
  });

  it('exchanges an identity token by an OAuth2 refresh-token POST', () => {
    const challenge = bearer({ realm: 'https://auth.test/t', service: 'reg', scope: 'other:x' });
    const realm = tokenRealm('r.test', challenge);
    const req = tokenRequest(realm, challenge, PULL, { identityToken: 'secret' });
    expect(req.url).toBe(realm);
    expect(req.init.method).toBe('POST');
    expect(req.init.headers).toEqual({ 'content-type': 'application/x-www-form-urlencoded' });
    expect(Object.fromEntries(new URLSearchParams(req.init.body))).toEqual({
      grant_type: 'refresh_token',
      refresh_token: 'secret',
      client_id: 'agentenv',
      service: 'reg',
      scope: `${PULL} other:x`,
    });
  });
});

describe('bearer token responses', () => {
  const parse = (doc: unknown) =>
    parseTokenResponse('auth.test', Buffer.from(JSON.stringify(doc)), 1_000_000);

  it('takes `token`, else OAuth2 `access_token`, renewing 10 s before expiry', () => {
    expect(parse({ token: 'a', access_token: 'b', expires_in: 300 })).toEqual({
      header: 'Bearer a',
      expiresAt: 1_000_000 + 290_000,
    });
    expect(parse({ token: '', access_token: 'b' })).toEqual({
      header: 'Bearer b',
      expiresAt: 1_000_000 + 50_000,
    });
    // A very short lifetime is still used for 10 s rather than not at all.
    expect(parse({ token: 'a', expires_in: 5 }).expiresAt).toBe(1_000_000 + 10_000);
    expect(parse({ token: 'a', expires_in: -1 }).expiresAt).toBe(1_000_000 + 50_000);
  });

  it('refuses an answer without a token, or one that is not JSON', () => {
    expect(() => parse({ expires_in: 60 })).toThrow(/token server auth.test returned no token/);
    expect(() => parse({ token: 42 })).toThrow(/returned no token/);
    for (const doc of ['null', '42', '"token"'])
      expect(() => parseTokenResponse('auth.test', Buffer.from(doc), 0)).toThrow(/returned no token/);
    expect(() => parseTokenResponse('auth.test', Buffer.from('<html>'), 0)).toThrow(
      /token server auth.test: bad response: /,
    );
  });
});
