import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import type * as S3Sdk from '@aws-sdk/client-s3';
import type { S3Client, S3ClientConfig } from '@aws-sdk/client-s3';
import { withoutSecrets } from '@agentenv/common';
import { RepositoryConfigError, RepositoryUnavailableError } from './errors.js';
import type { ObjectStat } from './repository.js';
import { ObjectRepository, type ObjectRepositoryOptions } from './repository-objects.js';

export interface S3RepositoryOptions extends ObjectRepositoryOptions {
  /** e.g. `https://s3.eu-west-1.amazonaws.com`, `https://oss-cn-hangzhou.aliyuncs.com`, `http://10.0.0.5:9000`. Absent: AWS for the region. */
  readonly endpoint?: string;
  readonly bucket: string;
  /** Required: signing (SigV4) needs it and a guessed one fails in confusing ways. */
  readonly region: string;
  /** Key prefix inside the bucket, e.g. `aenv/prod/`. */
  readonly prefix?: string;
  /** `path`: endpoint/bucket/key (MinIO, most self-hosted stores); `virtual` (default): bucket.endpoint/key. */
  readonly addressingStyle?: 'path' | 'virtual';
  readonly accessKeyId?: string;
  readonly secretAccessKey?: string;
  readonly sessionToken?: string;
  /**
   * A shell command printing credentials as AWS `credential_process` JSON
   * (`{"Version":1,"AccessKeyId","SecretAccessKey","SessionToken"?,"Expiration"?}`), run again
   * before they expire. Neither keys nor a command: the SDK's default chain (environment, profile).
   */
  readonly credentialProcess?: string;
  /** Attempts per request (default 3). */
  readonly maxAttempts?: number;
  readonly connectTimeoutMs?: number;
  readonly requestTimeoutMs?: number;
  /**
   * Whether the server honours `If-None-Match: *` on PUT. Default: found out by open() with a
   * probe object; when it does not, exclusive creates fall back to check-write-verify (below).
   */
  readonly conditionalWrites?: boolean;
}

/** How long a check-write-verify create waits before its second verification. */
const VERIFY_SETTLE_MS = 100;

interface Credentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  expiration?: Date;
}

const CREDENTIAL_ERRORS = new Set([
  'InvalidAccessKeyId',
  'SignatureDoesNotMatch',
  'AccessDenied',
  'ExpiredToken',
  'InvalidToken',
  'TokenRefreshRequired',
  'CredentialsProviderError',
]);

interface SdkError {
  name?: string;
  code?: string;
  message?: string;
  $metadata?: { httpStatusCode?: number };
}

const statusOf = (e: unknown) => (e as SdkError).$metadata?.httpStatusCode;
const isNotFound = (e: unknown) =>
  statusOf(e) === 404 &&
  (e as SdkError).name !== 'NoSuchBucket' &&
  (e as SdkError).name !== 'NoSuchBucketPolicy';

/** Checks the options and says what is wrong in terms of the configuration file. */
export function checkS3Options(o: Partial<S3RepositoryOptions>): S3RepositoryOptions {
  const bad = (m: string): never => {
    throw new RepositoryConfigError(m);
  };
  if (typeof o.region !== 'string' || o.region.trim() === '') {
    bad(
      'snapshot.oss.region is required: set backend.oss.region to the region of the bucket (e.g. us-east-1, or oss-cn-hangzhou); it is never guessed',
    );
  }
  if (typeof o.bucket !== 'string' || !/^[a-z0-9][a-z0-9.-]{1,62}$/.test(o.bucket)) {
    bad(`snapshot.oss.bucket is required (a valid bucket name, got ${JSON.stringify(o.bucket)})`);
  }
  if (o.endpoint !== undefined) {
    try {
      const u = new URL(o.endpoint);
      if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('scheme');
    } catch {
      bad(`snapshot.oss.endpoint ${JSON.stringify(o.endpoint)} is not an http(s) URL`);
    }
  }
  if (o.addressingStyle !== undefined && o.addressingStyle !== 'path' && o.addressingStyle !== 'virtual') {
    bad(
      `snapshot.oss.addressing_style must be "path" or "virtual", not ${JSON.stringify(o.addressingStyle)}`,
    );
  }
  if ((o.accessKeyId === undefined) !== (o.secretAccessKey === undefined)) {
    bad('snapshot.oss: access_key_id and access_key_secret go together');
  }
  if (o.accessKeyId !== undefined && o.credentialProcess !== undefined) {
    bad('snapshot.oss: give static keys or a credential process, not both');
  }
  if (o.prefix !== undefined && (typeof o.prefix !== 'string' || o.prefix.startsWith('/'))) {
    bad('snapshot.oss.prefix must not start with "/"');
  }
  return o as S3RepositoryOptions;
}

/** Runs a credential_process command (AWS's format). */
function runCredentialProcess(command: string): Promise<Credentials> {
  return new Promise((resolve, reject) => {
    const opts = { timeout: 30_000, maxBuffer: 1 << 20, env: withoutSecrets() };
    execFile('/bin/sh', ['-c', command], opts, (err, stdout, stderr) => {
      const fail = (m: string) =>
        reject(new RepositoryUnavailableError('credentials', `snapshot.oss credential process failed: ${m}`));
      if (err)
        return fail(`${err.message.split('\n')[0]}${stderr ? `: ${stderr.trim().slice(0, 500)}` : ''}`);
      try {
        const v = JSON.parse(stdout) as Record<string, unknown>;
        if (v.Version !== 1 || typeof v.AccessKeyId !== 'string' || typeof v.SecretAccessKey !== 'string') {
          return fail('its output is not {"Version":1,"AccessKeyId":…,"SecretAccessKey":…}');
        }
        resolve({
          accessKeyId: v.AccessKeyId,
          secretAccessKey: v.SecretAccessKey,
          ...(typeof v.SessionToken === 'string' ? { sessionToken: v.SessionToken } : {}),
          ...(typeof v.Expiration === 'string' ? { expiration: new Date(v.Expiration) } : {}),
        });
      } catch {
        fail('its output is not JSON');
      }
    });
  });
}

/**
 * The oss backend: any S3-compatible object store through @aws-sdk/client-s3. One object per
 * blob, record, alias and lock; a PUT is atomic (readers see the whole old or the whole new
 * object) and S3 has been strongly read-after-write consistent, listings included, since 2020.
 *
 * Exclusive create (names, records) sends `If-None-Match: *` (AWS S3 since 2024, MinIO, recent
 * OSS/R2), which is atomic on the server. Servers that ignore the header silently overwrite
 * instead (s3rver does; open() probes for it), so there it is check-write-verify: HEAD (exists →
 * refused), PUT, read back, wait VERIFY_SETTLE_MS, read back again; our bytes must be there both
 * times. Of two racing writers the one overwritten sees the other's bytes and backs off; both
 * can only believe they won if one stalls more than VERIFY_SETTLE_MS between its HEAD and its PUT
 * (the later PUT then holds the name). Use a server with conditional writes to close that gap.
 * Checksums are computed only when an operation requires them, for servers without the SDK's
 * default CRC trailers.
 */
export class S3Repository extends ObjectRepository {
  readonly backend = 'oss' as const;
  readonly location: string;
  private readonly clientConfig: S3ClientConfig;
  private sdk: Promise<{ client: S3Client; s3: typeof S3Sdk }> | undefined;
  private readonly bucket: string;
  private readonly prefix: string;
  private readonly endpointText: string;
  private cached: Credentials | null = null;
  private conditional: boolean | undefined;

  constructor(options: S3RepositoryOptions) {
    const o = checkS3Options(options);
    super(o);
    this.bucket = o.bucket;
    this.prefix = o.prefix ? o.prefix.replace(/\/*$/, '/') : '';
    this.location = `s3://${o.bucket}/${this.prefix}`;
    this.endpointText = o.endpoint ?? `the AWS endpoint of ${o.region}`;
    this.conditional = o.conditionalWrites;
    const config: S3ClientConfig = {
      region: o.region,
      forcePathStyle: o.addressingStyle === 'path',
      maxAttempts: o.maxAttempts ?? 3,
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      requestHandler: {
        connectionTimeout: o.connectTimeoutMs ?? 5_000,
        requestTimeout: o.requestTimeoutMs ?? 120_000,
      },
      ...(o.endpoint ? { endpoint: o.endpoint } : {}),
    };
    if (o.accessKeyId !== undefined && o.secretAccessKey !== undefined) {
      config.credentials = {
        accessKeyId: o.accessKeyId,
        secretAccessKey: o.secretAccessKey,
        ...(o.sessionToken ? { sessionToken: o.sessionToken } : {}),
      };
    } else if (o.credentialProcess !== undefined) {
      const command = o.credentialProcess;
      config.credentials = async () => {
        const c = this.cached;
        if (c && (!c.expiration || c.expiration.getTime() - Date.now() > 5 * 60_000)) return c;
        this.cached = await runCredentialProcess(command);
        return this.cached;
      };
    }
    // The pinned SDK runs on Node 20; its notice that later releases will need Node 22 would be
    // printed by every node at startup. An explicit setting of the variable is respected.
    process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
    this.clientConfig = config;
  }

  /**
   * The SDK, loaded on first use: importing it is a sixth of a node's start, which every node
   * with a POSIX repository (the default) would pay for nothing.
   */
  private connect(): Promise<{ client: S3Client; s3: typeof S3Sdk }> {
    this.sdk ??= import('@aws-sdk/client-s3').then(
      (s3) => ({ s3, client: new s3.S3Client(this.clientConfig) }),
      (e: unknown) => {
        // A broken install, not an unreachable server: fail() would call it the latter.
        throw new RepositoryUnavailableError(
          'io',
          `snapshot repository ${this.location}: the S3 client could not be loaded: ${(e as Error).message}`,
          { cause: e },
        );
      },
    );
    return this.sdk;
  }

  /** Known after open(): whether the server refuses a conditional PUT over an existing object. */
  get conditionalWrites(): boolean | undefined {
    return this.conditional;
  }

  private key(k: string): string {
    return this.prefix + k;
  }

  /** Every failure the SDK reports, as a typed error saying what to check. */
  private fail(what: string, e: unknown): never {
    if (e instanceof RepositoryUnavailableError) throw e;
    const err = e as SdkError;
    const status = statusOf(e);
    const name = err.name ?? 'Error';
    const detail = `${name}${status ? ` (HTTP ${status})` : ''}: ${err.message ?? ''}`.trim();
    if (CREDENTIAL_ERRORS.has(name) || status === 401 || status === 403) {
      throw new RepositoryUnavailableError(
        'credentials',
        `snapshot repository ${this.location} refused the credentials while ${what}: ${detail}`,
        { cause: e },
      );
    }
    if (name === 'NoSuchBucket') {
      throw new RepositoryUnavailableError(
        'bucket',
        `snapshot repository ${this.location}: bucket ${this.bucket} does not exist at ${this.endpointText}`,
        { cause: e },
      );
    }
    if (status === undefined) {
      throw new RepositoryUnavailableError(
        'unreachable',
        `snapshot repository ${this.location} at ${this.endpointText} is unreachable while ${what}: ${err.code ?? detail}${err.code ? ` (${err.message ?? ''})` : ''}`,
        { cause: e },
      );
    }
    throw new RepositoryUnavailableError(
      'io',
      `snapshot repository ${this.location}: ${what} failed: ${detail}`,
      {
        cause: e,
      },
    );
  }

  async open(): Promise<void> {
    try {
      const { client, s3 } = await this.connect();
      await client.send(
        new s3.ListObjectsV2Command({ Bucket: this.bucket, Prefix: this.prefix, MaxKeys: 1 }),
      );
      this.conditional ??= await this.probeConditionalWrites();
    } catch (e) {
      this.fail('opening the repository', e);
    }
  }

  /** Whether a conditional PUT over an existing object is refused (412), as it should be. */
  private async probeConditionalWrites(): Promise<boolean> {
    const Key = this.key(`tmp/probe-${randomBytes(8).toString('hex')}`);
    const { client, s3 } = await this.connect();
    const put = (extra: object) =>
      client.send(
        new s3.PutObjectCommand({ Bucket: this.bucket, Key, Body: Buffer.from('probe'), ...extra }),
      );
    try {
      await put({});
      await put({ IfNoneMatch: '*' });
      return false;
    } catch (e) {
      if (statusOf(e) === 412) return true;
      throw e;
    } finally {
      await client.send(new s3.DeleteObjectCommand({ Bucket: this.bucket, Key })).catch(() => undefined);
    }
  }

  async close(): Promise<void> {
    if (this.sdk) (await this.sdk.catch(() => null))?.client.destroy();
  }

  protected async putObject(
    key: string,
    body: Buffer | { readonly path: string },
    opts: { exclusive: boolean },
  ): Promise<boolean> {
    try {
      const { client, s3 } = await this.connect();
      const careful = opts.exclusive && this.conditional !== true && Buffer.isBuffer(body);
      if (careful && (await this.statObject(key))) return false;
      const Body = Buffer.isBuffer(body) ? body : createReadStream(body.path);
      const ContentLength = Buffer.isBuffer(body) ? body.length : (await stat(body.path)).size;
      try {
        await client.send(
          new s3.PutObjectCommand({
            Bucket: this.bucket,
            Key: this.key(key),
            Body,
            ContentLength,
            ...(opts.exclusive ? { IfNoneMatch: '*' } : {}),
          }),
        );
      } catch (e) {
        // 412: it exists; 409: a concurrent conditional write to the same key is in progress.
        if (opts.exclusive && (statusOf(e) === 412 || statusOf(e) === 409)) return false;
        throw e;
      }
      if (careful) {
        for (const wait of [0, VERIFY_SETTLE_MS]) {
          if (wait) await new Promise((r) => setTimeout(r, wait));
          const back = await this.getObject(key);
          if (!back?.data.equals(body as Buffer)) return false;
        }
      }
      return true;
    } catch (e) {
      return this.fail(`writing ${key}`, e);
    }
  }

  private async get(key: string) {
    try {
      const { client, s3 } = await this.connect();
      return await client.send(new s3.GetObjectCommand({ Bucket: this.bucket, Key: this.key(key) }));
    } catch (e) {
      if (isNotFound(e)) return null;
      return this.fail(`reading ${key}`, e);
    }
  }

  protected async getObject(key: string): Promise<{ data: Buffer; mtimeMs: number } | null> {
    const r = await this.get(key);
    if (!r?.Body) return null;
    try {
      const data = Buffer.from(await r.Body.transformToByteArray());
      return { data, mtimeMs: r.LastModified?.getTime() ?? Date.now() };
    } catch (e) {
      return this.fail(`reading ${key}`, e);
    }
  }

  protected async openObject(key: string): Promise<Readable | null> {
    const r = await this.get(key);
    return (r?.Body as Readable | undefined) ?? null;
  }

  protected async statObject(key: string): Promise<ObjectStat | null> {
    try {
      const { client, s3 } = await this.connect();
      const r = await client.send(new s3.HeadObjectCommand({ Bucket: this.bucket, Key: this.key(key) }));
      return { key, bytes: r.ContentLength ?? 0, mtimeMs: r.LastModified?.getTime() ?? Date.now() };
    } catch (e) {
      if (isNotFound(e)) return null;
      return this.fail(`stat ${key}`, e);
    }
  }

  protected async *listObjects(prefix: string): AsyncIterable<ObjectStat> {
    let token: string | undefined;
    do {
      let r;
      try {
        const { client, s3 } = await this.connect();
        r = await client.send(
          new s3.ListObjectsV2Command({
            Bucket: this.bucket,
            Prefix: this.key(prefix),
            ContinuationToken: token,
          }),
        );
      } catch (e) {
        return this.fail(`listing ${prefix}`, e);
      }
      for (const o of r.Contents ?? []) {
        if (!o.Key?.startsWith(this.prefix)) continue;
        yield {
          key: o.Key.slice(this.prefix.length),
          bytes: o.Size ?? 0,
          mtimeMs: o.LastModified?.getTime() ?? Date.now(),
        };
      }
      token = r.IsTruncated ? r.NextContinuationToken : undefined;
    } while (token);
  }

  protected async deleteObject(key: string): Promise<void> {
    try {
      const { client, s3 } = await this.connect();
      await client.send(new s3.DeleteObjectCommand({ Bucket: this.bucket, Key: this.key(key) }));
    } catch (e) {
      if (!isNotFound(e)) this.fail(`deleting ${key}`, e);
    }
  }
}
