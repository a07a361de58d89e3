import { Sandbox } from 'e2b';
import { beforeAll, describe, expect, it } from 'vitest';
import { useTestServer } from '@agentenv/test-support/server';

useTestServer();
beforeAll(async () => {
  // The first create waits for the base template (built once per machine).
  const warm = await Sandbox.create({ timeoutMs: 60_000 });
  await warm.kill();
});

const upload = (url: string, name: string, content: string) => {
  const form = new FormData();
  form.append('file', new Blob([content]), name);
  return fetch(url, { method: 'POST', body: form });
};

describe('signed file URLs of a secure sandbox through the node', () => {
  it('upload and download without the access token until they expire; forged ones get 401', async () => {
    // Two secure sandboxes: the signature alone must pick the right one.
    const [sbx, other] = await Promise.all([
      Sandbox.create({ secure: true }),
      Sandbox.create({ secure: true }),
    ]);
    try {
      const up = await sbx.uploadUrl('/home/user/signed.txt', { useSignatureExpiration: 120 });
      // The SDK puts the node's origin in the URL and nothing else that names the sandbox.
      expect(new URL(up).pathname).toBe('/files');
      const r = await upload(up, 'ignored', 'sent without a token');
      expect(r.status).toBe(200);
      expect(await r.json()).toEqual([{ name: 'signed.txt', path: '/home/user/signed.txt', type: 'file' }]);
      expect(await sbx.files.read('/home/user/signed.txt')).toBe('sent without a token');
      expect((await sbx.files.getInfo('/home/user/signed.txt')).owner).toBe('user');
      expect(await other.files.exists('/home/user/signed.txt')).toBe(false);

      const down = await fetch(
        await sbx.downloadUrl('/home/user/signed.txt', { useSignatureExpiration: 120 }),
      );
      expect(down.status).toBe(200);
      expect(await down.text()).toBe('sent without a token');
      // Without an expiry a signature stays valid; as root it reads root's files.
      await sbx.files.write('/root/secret', 'root only', { user: 'root' });
      const asRoot = await fetch(await sbx.downloadUrl('/root/secret', { user: 'root' }));
      expect(await asRoot.text()).toBe('root only');

      const expired = await fetch(
        await sbx.downloadUrl('/home/user/signed.txt', { useSignatureExpiration: -1 }),
      );
      expect(expired.status).toBe(401);
      expect(await expired.json()).toEqual({ code: 401, message: 'signature is already expired' });

      const valid = new URL(await sbx.downloadUrl('/home/user/signed.txt'));
      for (const [key, value] of [
        ['path', '/root/secret'],
        ['username', 'root'],
        ['signature', 'v1_' + 'A'.repeat(43)],
      ]) {
        const u = new URL(valid);
        u.searchParams.set(key!, value!);
        const t = await fetch(u);
        expect(t.status).toBe(401);
        expect(await t.json()).toEqual({ code: 401, message: 'invalid signature' });
      }
      // A read signature does not upload.
      const wrongOp = await upload(valid.toString(), 'x', 'overwrite');
      expect(wrongOp.status).toBe(401);
      expect(await sbx.files.read('/home/user/signed.txt')).toBe('sent without a token');
    } finally {
      await Promise.all([sbx.kill(), other.kill()]);
    }
  });
});
