import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export interface TestCerts {
  dir: string;
  caPath: string;
  ca: string;
  certPath: string;
  keyPath: string;
}

/** A CA made for the test and a wildcard server certificate for `*.{domain}` signed by it. */
export function makeWildcardCerts(domain: string): TestCerts {
  const dir = mkdtempSync(path.join(tmpdir(), 'aenv-h9-tls-'));
  const f = (n: string) => path.join(dir, n);
  const ssl = (...args: string[]) => execFileSync('openssl', args, { stdio: 'pipe' });
  ssl(
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '2',
    '-subj',
    '/CN=AgentENV test CA',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
    '-keyout',
    f('ca.key'),
    '-out',
    f('ca.pem'),
  );
  ssl(
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-subj',
    `/CN=*.${domain}`,
    '-keyout',
    f('edge.key'),
    '-out',
    f('edge.csr'),
  );
  writeFileSync(
    f('edge.ext'),
    [
      `subjectAltName=DNS:*.${domain},DNS:${domain}`,
      'basicConstraints=CA:FALSE',
      'keyUsage=digitalSignature,keyEncipherment',
      'extendedKeyUsage=serverAuth',
    ].join('\n'),
  );
  ssl(
    'x509',
    '-req',
    '-in',
    f('edge.csr'),
    '-CA',
    f('ca.pem'),
    '-CAkey',
    f('ca.key'),
    '-CAcreateserial',
    '-days',
    '2',
    '-extfile',
    f('edge.ext'),
    '-out',
    f('edge.pem'),
  );
  return {
    dir,
    caPath: f('ca.pem'),
    ca: readFileSync(f('ca.pem'), 'utf8'),
    certPath: f('edge.pem'),
    keyPath: f('edge.key'),
  };
}
