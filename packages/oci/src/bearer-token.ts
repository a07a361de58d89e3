import { addressClass } from './address-class.js';
import { basicAuthHeader, type Challenge, type Credentials } from './auth.js';
import { OciError } from './errors.js';
import type { HttpRequest } from './http.js';

/** The request for a bearer token, as the distribution spec's token flow wants it sent. */
export interface TokenRequest {
  readonly url: URL;
  readonly init: Pick<HttpRequest, 'method' | 'headers' | 'body'>;
}

/** A token ready to send, and when to stop using it. */
export interface CachedToken {
  readonly header: string;
  readonly expiresAt: number;
}

/**
 * The token server named by a bearer challenge's realm, when the node may ask it: see
 * `realmRefusal`. A registry is only trusted with where its own tokens come from this far.
 */
export function tokenRealm(registry: string, base: URL, challenge: Challenge): URL {
  const realm = challenge.params.realm;
  if (!realm) throw new OciError('unauthorized', `registry ${registry}: bearer challenge without realm`);
  let url: URL;
  try {
    url = new URL(realm);
  } catch {
    throw new OciError('unauthorized', `registry ${registry}: bad token realm ${realm}`);
  }
  const refused = realmRefusal(base, url);
  if (refused)
    throw new OciError('unauthorized', `registry ${registry}: bad token realm ${realm}: ${refused}`);
  return url;
}

/**
 * Why the node may not ask `realm` for a registry's (at `registry`) token, or undefined when
 * it may: only http(s); never a link-local address (a cloud's metadata service); the registry's
 * own host by https or the registry's own scheme; any other host only by https and only when
 * it is not a loopback or private address. Names are judged here as written; what they resolve
 * to, by realmAddressRefusal as the token request connects.
 */
export function realmRefusal(registry: URL, realm: URL): string | undefined {
  if (realm.protocol !== 'https:' && realm.protocol !== 'http:') return 'only http(s) URLs are followed';
  const kind = addressClass(realm.hostname);
  if (kind === 'link-local') return 'a link-local address is never asked';
  if (realm.hostname === registry.hostname) {
    const scheme = realm.protocol === 'https:' || realm.protocol === registry.protocol;
    return scheme ? undefined : `the registry is reached by ${registry.protocol}, not by ${realm.protocol}`;
  }
  if (realm.protocol !== 'https:') return "a host other than the registry's is only asked over https";
  if (kind) return `a ${kind} address other than the registry's own is not asked`;
  return undefined;
}

/**
 * Why a token server may not be reached at a resolved `address`: a name that leads to a
 * link-local address (a cloud's metadata service) is refused as that address is.
 */
export function realmAddressRefusal(address: string): string | undefined {
  return addressClass(address) === 'link-local' ? 'a link-local address is never asked' : undefined;
}

/**
 * The token request for `scope` plus whatever scopes the challenge names: an identity token is
 * exchanged by an OAuth2 refresh-token POST, otherwise a GET carries basic auth (or none).
 */
export function tokenRequest(
  realm: URL,
  challenge: Challenge,
  scope: string,
  creds: Credentials | undefined,
): TokenRequest {
  const service = challenge.params.service;
  const scopes = [...new Set([scope, ...(challenge.params.scope ? challenge.params.scope.split(' ') : [])])];
  if (creds && 'identityToken' in creds) {
    const form = new URLSearchParams({
      grant_type: 'refresh_token',
      refresh_token: creds.identityToken,
      client_id: 'agentenv',
      ...(service ? { service } : {}),
      scope: scopes.join(' '),
    });
    return {
      url: realm,
      init: {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: form.toString(),
      },
    };
  }
  const url = new URL(realm);
  if (service) url.searchParams.set('service', service);
  for (const s of scopes) url.searchParams.append('scope', s);
  if (creds) url.searchParams.set('account', creds.username);
  return { url, init: { headers: creds ? { authorization: basicAuthHeader(creds) } : {} } };
}

export function badTokenResponse(host: string, e: Error): OciError {
  return new OciError('registry_error', `token server ${host}: bad response: ${e.message}`);
}

/** The token in a token server's JSON answer (`token`, or OAuth2's `access_token`), with its expiry. */
export function parseTokenResponse(host: string, body: Buffer, now: number): CachedToken {
  let doc: { token?: unknown; access_token?: unknown; expires_in?: unknown } | null;
  try {
    doc = JSON.parse(body.toString('utf8')) as typeof doc;
  } catch (e) {
    throw badTokenResponse(host, e as Error);
  }
  if (typeof doc !== 'object' || doc === null)
    throw new OciError('registry_error', `token server ${host} returned no token`);
  const token =
    typeof doc.token === 'string' && doc.token
      ? doc.token
      : typeof doc.access_token === 'string'
        ? doc.access_token
        : '';
  if (!token) throw new OciError('registry_error', `token server ${host} returned no token`);
  const ttl = typeof doc.expires_in === 'number' && doc.expires_in > 0 ? doc.expires_in : 60;
  // Renew a little early so a long pull does not hit expiry mid-request.
  return { header: `Bearer ${token}`, expiresAt: now + Math.max(10, ttl - 10) * 1000 };
}
