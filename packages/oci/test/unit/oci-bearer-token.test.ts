import { describe, expect, it } from 'vitest';
import {
  parseTokenResponse,
  realmAddressRefusal,
  realmRefusal,
  tokenRealm,
  tokenRequest,
} from '../../src/bearer-token.js';
import { OciError } from '../../src/errors.js';
import { guardedLookup, send } from '../../src/http.js';

const bearer = (params: Record<string, string>) => ({ scheme: 'bearer', params });
const PULL = 'repository:app:pull';
const REG = new URL('https://r.test/v2/');

describe('bearer token requests', () => {
  it('follows only an http(s) realm', () => {
    expect(tokenRealm('r.test', REG, bearer({ realm: 'https://auth.test/token' })).href).toBe(
      'https://auth.test/token',
    );
    expect(() => tokenRealm('r.test', REG, bearer({}))).toThrow(
      /registry r.test: bearer challenge without realm/,
    );
    expect(() => tokenRealm('r.test', REG, bearer({ realm: 'not a url' }))).toThrow(
      /bad token realm not a url/,
    );
    expect(() => tokenRealm('r.test', REG, bearer({ realm: 'file:///etc/passwd' }))).toThrow(
      /bad token realm/,
    );
    expect(() => tokenRealm('r.test', REG, bearer({ realm: 'http://169.254.169.254/latest' }))).toThrow(
      /registry r.test: bad token realm http:\/\/169.254.169.254\/latest: a link-local address is never asked/,
    );
  });

  describe('which realm a registry may name', () => {
    const refusal = (registry: string, realm: string) => realmRefusal(new URL(registry), new URL(realm));
    const local = 'http://127.0.0.1:5000/v2/';

    it('any public host by https', () => {
      expect(refusal('https://r.test/v2/', 'https://auth.docker.io/token')).toBeUndefined();
      expect(refusal('https://r.test/v2/', 'https://8.8.8.8/token')).toBeUndefined();
      expect(refusal(local, 'https://auth.test/token')).toBeUndefined();
    });

    it("the registry's own host by https or by the scheme the registry uses, on any port", () => {
      expect(refusal(local, 'http://127.0.0.1:5001/token')).toBeUndefined();
      expect(refusal(local, 'https://127.0.0.1/token')).toBeUndefined();
      expect(refusal('https://r.test/v2/', 'https://r.test:8443/token')).toBeUndefined();
      expect(refusal('http://10.0.0.5:5000/v2/', 'http://10.0.0.5/token')).toBeUndefined();
      expect(refusal('https://r.test/v2/', 'http://r.test/token')).toMatch(/reached by https:, not by http:/);
    });

    it("never a link-local address, in any spelling, not even the registry's own", () => {
      for (const realm of [
        'http://169.254.169.254/latest/meta-data',
        'https://169.254.169.254/',
        'https://2852039166/',
        'https://[fe80::1]/token',
        'https://[::ffff:169.254.169.254]/token',
      ])
        expect(refusal('https://r.test/v2/', realm), realm).toMatch(/link-local/);
      expect(refusal('http://169.254.1.1:5000/v2/', 'http://169.254.1.1/token')).toMatch(/link-local/);
    });

    it("no loopback or private address but the registry's own", () => {
      for (const realm of [
        'https://127.0.0.1/token',
        'https://localhost/token',
        'https://10.1.2.3/token',
        'https://172.16.0.1/token',
        'https://192.168.1.1/token',
        'https://[::1]/token',
        'https://[fd00::1]/token',
        'https://0.0.0.0/token',
      ])
        expect(refusal('https://r.test/v2/', realm), realm).toMatch(/(loopback|private) address other than/);
      expect(refusal(local, 'https://10.0.0.1/token')).toMatch(/private address/);
    });

    it("plain http only to the registry's own host", () => {
      expect(refusal('https://r.test/v2/', 'http://auth.test/token')).toMatch(/only asked over https/);
      expect(refusal(local, 'http://auth.test/token')).toMatch(/only asked over https/);
      expect(refusal(local, 'ftp://127.0.0.1/token')).toMatch(/only http\(s\)/);
    });
  });

  it('asks anonymously by GET for the pull scope and those the challenge names, once each', () => {
    const challenge = bearer({
      realm: 'https://auth.test/token?x=1',
      service: 'reg',
      scope: `${PULL} other:x`,
    });
    const req = tokenRequest(tokenRealm('r.test', REG, challenge), challenge, PULL, undefined);
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
    const challenge = bearer({ realm: 'https://auth.test/t' });
    const req = tokenRequest(tokenRealm('r.test', REG, challenge), challenge, PULL, {
      username: 'u',
      password: 'p',
    });
    expect(req.init.headers).toEqual({ authorization: `Basic ${Buffer.from('u:p').toString('base64')}` });
    expect(req.url.searchParams.get('account')).toBe('u');
    expect(req.url.searchParams.has('service')).toBe(false);
  });

  it('exchanges an identity token by an OAuth2 refresh-token POST', () => {
    const challenge = bearer({ realm: 'https://auth.test/t', service: 'reg', scope: 'other:x' });
    const realm = tokenRealm('r.test', REG, challenge);
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

describe('where a token server name leads', () => {
  type Found = { err: Error | null; address: unknown };
  const lookup = (addresses: string[], all = false) =>
    new Promise<Found>((resolve) =>
      guardedLookup(realmAddressRefusal, (_host, _o, cb) =>
        cb(
          null,
          addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 })),
        ),
      )('auth.test', { all }, ((err: Error | null, address: unknown) => resolve({ err, address })) as never),
    );

  it('refuses a name that resolves to a link-local address, whatever else it resolves to', async () => {
    const { err } = await lookup(['8.8.8.8', '169.254.169.254']);
    expect(err).toBeInstanceOf(OciError);
    expect(err!.message).toBe('auth.test resolves to 169.254.169.254: a link-local address is never asked');
    expect((await lookup(['fe80::1'])).err).toBeInstanceOf(OciError);
  });

  it('passes public and private addresses on, one or all as asked', async () => {
    expect(await lookup(['10.0.0.1'])).toEqual({ err: null, address: '10.0.0.1' });
    expect((await lookup(['8.8.8.8', '10.0.0.1'], true)).address).toHaveLength(2);
  });

  it('fails a request for good when its host resolves to a refused address', async () => {
    const err = await send(new URL('http://localhost:9/token'), {
      timeoutMs: 5000,
      addressRefusal: (a) => (a === '127.0.0.1' || a === '::1' ? 'refused here' : undefined),
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OciError);
    expect((err as Error).message).toMatch(/^localhost resolves to (127\.0\.0\.1|::1): refused here$/);
  });
});
