import { fileSignature } from '@agentenv/envd/file-signature';
import { describe, expect, it } from 'vitest';
import { signedFilesRoute } from '../../src/proxy/signed-files.js';

const sandboxes = () => [
  { sandboxId: 'open1' },
  { sandboxId: 'sec1', envdAccessToken: 'token-one' },
  { sandboxId: 'sec2', envdAccessToken: 'token-two' },
];
const url = (q: Record<string, string>) => `/files?${new URLSearchParams(q)}`;

describe('signed /files URLs without routing headers', () => {
  it('go to the sandbox whose token made the signature', () => {
    const sig = fileSignature('/home/user/a', 'read', '', 'token-two', 99);
    const u = url({ path: '/home/user/a', signature: sig, signature_expiration: '99' });
    expect(signedFilesRoute(u, 'GET', sandboxes)).toEqual({
      sandboxId: 'sec2',
      port: 49983,
      path: u,
      native: false,
    });
    const w = url({
      path: 'x',
      username: 'root',
      signature: fileSignature('x', 'write', 'root', 'token-one'),
    });
    expect(signedFilesRoute(w, 'POST', sandboxes)).toMatchObject({ sandboxId: 'sec1' });
    // The operation is part of the signature.
    expect(signedFilesRoute(w, 'GET', sandboxes)).toBe('no-match');
  });

  it('match no sandbox when forged or changed', () => {
    const sig = fileSignature('/a', 'read', '', 'token-one');
    expect(signedFilesRoute(url({ path: '/b', signature: sig }), 'GET', sandboxes)).toBe('no-match');
    expect(signedFilesRoute(url({ path: '/a', signature: 'v1_forged' }), 'GET', sandboxes)).toBe('no-match');
    expect(signedFilesRoute(url({ path: '/a', signature: sig }), 'GET', () => [])).toBe('no-match');
  });

  it('leave every other request to the API, without listing the sandboxes', () => {
    const sig = fileSignature('/a', 'read', '', 'token-one');
    const unread = () => {
      throw new Error('the sandboxes were listed for a request without a signature');
    };
    expect(signedFilesRoute('/files?path=/a', 'GET', unread)).toBeUndefined();
    expect(signedFilesRoute('/files', 'GET', unread)).toBeUndefined();
    expect(signedFilesRoute(`/filesx?signature=${sig}`, 'GET', unread)).toBeUndefined();
    expect(signedFilesRoute(`/v2/sandboxes?signature=${sig}`, 'GET', unread)).toBeUndefined();
    expect(signedFilesRoute(url({ path: '/a', signature: sig }), 'DELETE', unread)).toBeUndefined();
  });
});
