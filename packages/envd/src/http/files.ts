import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { chown, open, stat, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { createGzip, createGunzip, gzipSync } from 'node:zlib';
import busboy from 'busboy';
import { basicAuthUser } from '../auth.js';
import {
  checkFileSignature,
  signedFileRequest,
  type FileOperation,
  type SignedFileRequest,
} from '../file-signature.js';
import { EnvdError, invalidArgument, notFound, toEnvdError, unauthenticated } from '../errors.js';
import { ensureDirs } from '../filesystem/dirs.js';
import { metadataFromHeaders, metadataStore, type Metadata } from '../filesystem/metadata.js';
import type { EnvdState } from '../state.js';
import type { SystemUser } from '../users.js';
import { sendJson } from './respond.js';
import {
  contentDisposition,
  identityAcceptable,
  negotiateEncoding,
  parseContentEncoding,
  parseRange,
} from './negotiate.js';

/** False when the file is gone. */
async function chownIfExists(p: string, user: SystemUser): Promise<boolean> {
  try {
    await chown(p, user.uid, user.gid);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
}

/** The largest part without a file name: busboy holds such a part in memory. */
const MAX_FIELD_FILE = 64 << 20;

/** One written file, as E2B's envd lists it in the upload reply. */
interface UploadedFile {
  name: string;
  path: string;
  type: 'file';
  metadata?: Metadata;
}

/**
 * /files: GET downloads a file, POST uploads one or many (E2B's envd API). With an access token
 * set, a request needs the token in X-Access-Token or a URL signature for its path, operation
 * and user. The user is the `username` query parameter, else the Basic-auth user, else the
 * default user.
 */
export async function handleFiles(
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  state: EnvdState,
): Promise<void> {
  const method = req.method ?? 'GET';
  if (method !== 'GET' && method !== 'HEAD' && method !== 'POST') {
    res.setHeader('allow', 'GET, HEAD, POST');
    sendJson(res, 405, { code: 405, message: `method ${method} is not allowed on /files` });
    return;
  }
  const signed = signedFileRequest(url.searchParams, method);
  const operation: FileOperation = signed.operation;
  const pathParam = url.searchParams.get('path') ?? undefined;
  const username = signed.username;
  // A signature covers the `username` parameter only: a Basic-auth header must not change who a
  // signed URL acts as.
  const bySignature = authorize(req, state, signed) === 'signature';
  const user = state.userFor(
    username || (bySignature ? undefined : basicAuthUser(req.headers.authorization)),
  );
  if (operation === 'read') {
    await download(req, res, state.resolvePath(pathParam ?? '', user, true), method === 'HEAD');
    return;
  }
  try {
    const files = await upload(req, state, user, pathParam);
    sendJson(res, 200, files);
  } catch (err) {
    // Discard the rest of a body we stopped reading, so the error reply gets through.
    req.unpipe();
    req.resume();
    throw err;
  }
}

function authorize(
  req: IncomingMessage,
  state: EnvdState,
  signed: SignedFileRequest,
): 'open' | 'token' | 'signature' {
  if (!state.accessToken) return 'open';
  const header = req.headers['x-access-token'];
  if (typeof header === 'string' && header !== '') {
    if (!state.tokenAccepted(header))
      throw unauthenticated('access token present in header but does not match');
    return 'token';
  }
  const check = checkFileSignature(signed, state.accessToken, Math.floor(Date.now() / 1000));
  if (!check.ok) throw unauthenticated(check.reason);
  return 'signature';
}

async function download(
  req: IncomingMessage,
  res: ServerResponse,
  p: string,
  headOnly: boolean,
): Promise<void> {
  let st;
  try {
    st = await stat(p);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') throw notFound(`path '${p}' does not exist`);
    throw toEnvdError(err, p);
  }
  if (st.isDirectory()) throw invalidArgument(`path '${p}' is a directory`);
  // Opening a FIFO would block until a writer shows up.
  if (st.isFIFO() || st.isSocket()) throw invalidArgument(`path '${p}' is not a regular file`);

  const acceptEncoding = req.headers['accept-encoding'];
  const rangeHeader = req.headers.range;
  // Ranges are served unencoded, as Go's http.ServeContent in E2B's envd does.
  let encoding = rangeHeader
    ? identityAcceptable(acceptEncoding)
      ? 'identity'
      : undefined
    : negotiateEncoding(acceptEncoding);
  if (encoding === undefined) {
    sendJson(res, 406, { code: 406, message: 'no acceptable encoding found, supported: [gzip]' });
    return;
  }
  // Files such as /proc's report size 0 but have content: stream those without a length.
  const knownSize = st.isFile() && st.size > 0 ? st.size : undefined;
  const range = rangeHeader && knownSize !== undefined ? parseRange(rangeHeader, knownSize) : undefined;
  if (range === 'unsatisfiable') {
    res.writeHead(416, { 'content-range': `bytes */${knownSize}` }).end();
    return;
  }

  const fh = await open(p, 'r').catch((err: unknown) => {
    throw toEnvdError(err, p);
  });
  // undici's fetch asks for gzip on every request, so compressing incompressible files (build
  // outputs, archives, random data) would cut downloads to gzip's speed for nothing: sample the
  // start of the file and send it as is when gzip would not shrink it.
  if (
    encoding === 'gzip' &&
    knownSize !== undefined &&
    knownSize > GZIP_SAMPLE &&
    !(await worthCompressing(fh))
  ) {
    encoding = 'identity';
  }
  const headers: Record<string, string | number> = {
    'content-type': 'application/octet-stream',
    'content-disposition': contentDisposition(path.basename(p)),
    'last-modified': st.mtime.toUTCString(),
    vary: 'Accept-Encoding',
  };
  let status = 200;
  if (encoding === 'gzip') {
    headers['content-encoding'] = 'gzip';
  } else {
    headers['accept-ranges'] = 'bytes';
    if (range) {
      status = 206;
      headers['content-range'] = `bytes ${range.start}-${range.end}/${knownSize}`;
      headers['content-length'] = range.end - range.start + 1;
    } else if (knownSize !== undefined) {
      headers['content-length'] = knownSize;
    }
  }
  if (headOnly) {
    await fh.close();
    res.writeHead(status, headers).end();
    return;
  }
  res.writeHead(status, headers);
  const source = fh.createReadStream(range ? { start: range.start, end: range.end } : {});
  try {
    // Level 1: on large transfers speed matters more than the last few percent of size.
    if (encoding === 'gzip') await pipeline(source, createGzip({ level: 1 }), res);
    else await pipeline(source, res);
  } catch {
    // The client went away or the file failed mid-way: the response is cut short.
    res.destroy();
  }
}

/**
 * The request body, gunzipped when it says `Content-Encoding: gzip`. Call it only when about to
 * consume it: a gunzip stream fails as soon as data flows, and nobody would hear it.
 */
function requestBody(req: IncomingMessage): Readable {
  if (parseContentEncoding(req.headers['content-encoding']) === 'identity') return req;
  const gunzip = createGunzip();
  req.on('close', () => {
    if (!req.complete) gunzip.destroy(new Error('request body ended early'));
  });
  return req.pipe(gunzip);
}

/**
 * Failures of the body (bad gzip, malformed multipart, cut short) are the client's fault; system
 * errors (ENOSPC, ...) keep their own meaning.
 */
function bodyError(err: unknown): EnvdError {
  if (err instanceof EnvdError) return err;
  const code = (err as NodeJS.ErrnoException).code;
  const message = err instanceof Error ? err.message : String(err);
  if (code?.startsWith('Z_')) return invalidArgument(`error decompressing request body: ${message}`);
  if (code === undefined) return invalidArgument(`error reading request body: ${message}`);
  return toEnvdError(err);
}

/**
 * Pipes `source` into `dest` without destroying `source` on failure (it may be the request, and
 * the socket must survive to carry the error reply); `dest` is destroyed. Settles when `dest`
 * has taken everything and closed.
 */
function pipeInto(source: Readable, dest: Writable): Promise<void> {
  return new Promise((resolve, reject) => {
    let ended = false;
    const fail = (err: unknown) => {
      source.unpipe(dest);
      dest.destroy();
      reject(err);
    };
    if (source.destroyed && !source.readableEnded) {
      fail(source.errored ?? new Error('request body ended early'));
      return;
    }
    source.once('end', () => (ended = true));
    source.on('error', fail);
    source.once('close', () => {
      if (!ended) fail(new Error('request body ended early'));
    });
    dest.on('error', fail);
    dest.once('close', () => resolve());
    source.pipe(dest);
  });
}

async function upload(
  req: IncomingMessage,
  state: EnvdState,
  user: SystemUser,
  pathParam: string | undefined,
): Promise<UploadedFile[]> {
  const metadata = metadataFromHeaders(req.headersDistinct);
  const contentType = req.headers['content-type'] ?? '';
  const mediaType = contentType.split(';')[0]!.trim().toLowerCase();
  if (mediaType === 'application/octet-stream') {
    if (pathParam === undefined || pathParam === '') {
      throw invalidArgument('path query parameter is required for raw body upload');
    }
    const target = state.resolvePath(pathParam, user, true);
    parseContentEncoding(req.headers['content-encoding']); // refuse an unknown encoding first
    return [await writeFile(target, () => requestBody(req), user, metadata)];
  }
  if (!mediaType.startsWith('multipart/')) {
    throw invalidArgument(
      `unsupported content type: ${contentType}, expected multipart/form-data or application/octet-stream`,
    );
  }
  return uploadMultipart(
    req,
    (filename) => {
      const given = pathParam || filename;
      if (!given)
        throw invalidArgument('multipart file part has no filename and there is no path query parameter');
      return state.resolvePath(given, user, true);
    },
    (target, part) => writeFile(target, () => part, user, metadata),
  );
}

/** Writes each `file` part, one after another, in the order they arrive. */
function uploadMultipart(
  req: IncomingMessage,
  targetOf: (filename: string | undefined) => string,
  write: (target: string, part: Readable) => Promise<UploadedFile>,
): Promise<UploadedFile[]> {
  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({
        headers: req.headers,
        // Part filenames are destination paths: keep their directories, read them as UTF-8.
        preservePath: true,
        defParamCharset: 'utf8',
        // A part without a file name comes as a field: latin1 keeps its bytes.
        defCharset: 'latin1',
        limits: { fields: 1000, fieldSize: MAX_FIELD_FILE, headerPairs: 100 },
      });
    } catch (err) {
      reject(invalidArgument(`error parsing multipart form: ${(err as Error).message}`));
      return;
    }
    const written: UploadedFile[] = [];
    let failure: unknown;
    let chain = Promise.resolve();
    const fail = (err: unknown) => {
      if (failure === undefined) failure = bodyError(err);
      reject(failure);
    };
    const enqueue = (filename: string | undefined, part: Readable) => {
      chain = chain
        .then(async () => {
          if (failure !== undefined) return void part.resume();
          const target = targetOf(filename);
          if (written.some((f) => f.path === target)) {
            throw invalidArgument(
              `you cannot upload multiple files to the same path '${target}' in one upload request, ` +
                'only the first specified file was uploaded',
            );
          }
          written.push(await write(target, part));
        })
        .catch((err: unknown) => {
          part.resume();
          fail(err);
        });
    };
    parser.on('file', (field, part, info) => {
      // A part fails when the form is cut short, maybe before anyone reads it; pipeInto sees it.
      part.on('error', () => undefined);
      if (field !== 'file' || failure !== undefined) {
        part.resume();
        return;
      }
      enqueue(info.filename, part);
    });
    // E2B's envd writes every part named `file`, also one without a file name (FormData's
    // `append('file', 'text')`), which busboy hands over as a field.
    parser.on('field', (field, value: string, info) => {
      if (field !== 'file' || failure !== undefined) return;
      if (info.valueTruncated) {
        fail(invalidArgument(`a file part without a file name must be under ${MAX_FIELD_FILE} bytes`));
        return;
      }
      // Decoded as latin1 (defCharset): one character per byte, so this gives the bytes back. A
      // part that names another charset is decoded in it, and only its latin1 text survives.
      enqueue(undefined, Readable.from([Buffer.from(value, 'latin1')]));
    });
    let body: Readable;
    try {
      body = requestBody(req);
    } catch (err) {
      fail(err);
      return;
    }
    pipeInto(body, parser)
      .then(() => chain)
      .then(() => {
        if (failure === undefined) resolve(written);
      })
      .catch(fail);
  });
}

/**
 * Streams `source` into `target` as E2B's envd does: parents created and owned by the user, the
 * file truncated in place (not replaced, so links and watchers see the same inode) and owned by
 * the user, then its metadata set replaced.
 */
async function writeFile(
  target: string,
  source: () => Readable,
  user: SystemUser,
  metadata: Metadata,
): Promise<UploadedFile> {
  try {
    await ensureDirs(path.dirname(target), user.uid, user.gid);
    const existing = await stat(target).catch(() => undefined);
    if (existing?.isDirectory()) throw invalidArgument(`path is a directory: ${target}`);
    // The owner is set as E2B's envd sets it, so watchers see the same events: an existing file's
    // before it is truncated, a new file's once it is made.
    const chowned = existing !== undefined && (await chownIfExists(target, user));
    const fh = await open(target, 'w', 0o666);
    try {
      if (!chowned) await fh.chown(user.uid, user.gid);
    } catch (err) {
      await fh.close();
      throw err;
    }
    // The stream owns the descriptor from here and closes it, also on failure.
    await pipeInto(source(), fh.createWriteStream());
    await metadataStore.write(target, metadata);
  } catch (err) {
    throw bodyError(err);
  }
  const persisted = await metadataStore.read(target);
  return {
    name: path.basename(target),
    path: target,
    type: 'file',
    ...(Object.keys(persisted).length > 0 ? { metadata: persisted } : {}),
  };
}

const GZIP_SAMPLE = 64 * 1024;

/** True when gzip shrinks the file's first 64 KiB by at least 10 %. */
async function worthCompressing(fh: FileHandle): Promise<boolean> {
  const sample = Buffer.alloc(GZIP_SAMPLE);
  const { bytesRead } = await fh.read(sample, 0, GZIP_SAMPLE, 0);
  return gzipSync(sample.subarray(0, bytesRead), { level: 1 }).length < bytesRead * 0.9;
}
