import { useState } from 'preact/hooks';
import { api, describeError } from '../api.js';
import { session } from '../session.js';

/** Asks for the API key, checks it against the server, and keeps it for this tab only. */
export function Login({ onLogin, notice }: { onLogin: () => void; notice?: string }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState(notice ?? '');
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError('');
    try {
      await api.checkKey(key.trim());
      session.set(key.trim());
      onLogin();
    } catch (err) {
      setError(describeError(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="login">
      <form onSubmit={submit} aria-label="Sign in">
        <h1>AgentENV</h1>
        <p class="muted">Sign in with the API key of this node or cluster.</p>
        <label for="api-key">API key</label>
        <input
          id="api-key"
          name="api-key"
          type="password"
          autocomplete="off"
          required
          value={key}
          onInput={(e) => setKey((e.target as HTMLInputElement).value)}
        />
        <button type="submit" disabled={busy || !key.trim()}>
          {busy ? 'Checking…' : 'Sign in'}
        </button>
        {error && (
          <p class="error" role="alert">
            {error}
          </p>
        )}
      </form>
    </main>
  );
}
