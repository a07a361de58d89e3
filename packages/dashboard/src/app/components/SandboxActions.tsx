import { useState } from 'preact/hooks';
import { api, describeError } from '../api.js';
import { Confirm } from './Confirm.js';

interface Props {
  sandboxID: string;
  state: string;
  /** Called after an action succeeded (the stream will also tell). */
  onDone?: (action: string) => void;
  /** The detail page offers all actions; a table row the quick ones. */
  full?: boolean;
}

/**
 * Pause, resume, snapshot, extend timeout and kill, through the public API with the same key
 * and errors as any client. Kill, the one that loses data, asks first.
 */
export function SandboxActions({ sandboxID, state, onDone, full }: Props) {
  const [busy, setBusy] = useState('');
  const [error, setError] = useState('');
  const [confirmKill, setConfirmKill] = useState(false);

  const run = async (action: string, fn: () => Promise<unknown>) => {
    setConfirmKill(false);
    setBusy(action);
    setError('');
    try {
      await fn();
      onDone?.(action);
    } catch (err) {
      setError(`${action} failed: ${describeError(err)}`);
    } finally {
      setBusy('');
    }
  };
  const running = state === 'running';
  const paused = state === 'paused';
  const transient = !running && !paused;

  return (
    <div class="sandbox-actions">
      <div class="buttons">
        {running && (
          <button type="button" disabled={!!busy} onClick={() => run('pause', () => api.pause(sandboxID))}>
            {busy === 'pause' ? 'Pausing…' : 'Pause'}
          </button>
        )}
        {paused && (
          <button type="button" disabled={!!busy} onClick={() => run('resume', () => api.resume(sandboxID))}>
            {busy === 'resume' ? 'Resuming…' : 'Resume'}
          </button>
        )}
        <button
          type="button"
          class="danger"
          disabled={!!busy || transient}
          onClick={() => setConfirmKill(true)}
        >
          {busy === 'kill' ? 'Killing…' : 'Kill'}
        </button>
      </div>
      {full && running && (
        <SnapshotForm
          busy={busy}
          onSubmit={(name) => void run('snapshot', () => api.snapshot(sandboxID, name))}
        />
      )}
      {full && running && (
        <TimeoutForm
          busy={busy}
          onSubmit={(secs) => void run('timeout', () => api.setTimeout(sandboxID, secs))}
        />
      )}
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {confirmKill && (
        <Confirm
          title="Kill this sandbox?"
          message={`Sandbox ${sandboxID} and everything in it will be gone. This cannot be undone.`}
          confirmLabel="Kill"
          onConfirm={() => void run('kill', () => api.kill(sandboxID))}
          onCancel={() => setConfirmKill(false)}
        />
      )}
    </div>
  );
}

/** Takes a snapshot of the running sandbox, under an optional name. */
function SnapshotForm({ busy, onSubmit }: { busy: string; onSubmit: (name: string | undefined) => void }) {
  const [name, setName] = useState('');
  return (
    <form
      class="inline"
      onSubmit={(e) => {
        e.preventDefault();
        onSubmit(name.trim() || undefined);
      }}
    >
      <input
        aria-label="snapshot name (optional)"
        placeholder="snapshot name (optional)"
        value={name}
        onInput={(e) => setName((e.target as HTMLInputElement).value)}
      />
      <button type="submit" disabled={!!busy}>
        {busy === 'snapshot' ? 'Snapshotting…' : 'Snapshot'}
      </button>
    </form>
  );
}

/** Sets the sandbox's timeout, in seconds from now. */
function TimeoutForm({ busy, onSubmit }: { busy: string; onSubmit: (secs: number) => void }) {
  const [secs, setSecs] = useState('300');
  return (
    <form
      class="inline"
      onSubmit={(e) => {
        e.preventDefault();
        onSubmit(Number(secs));
      }}
    >
      <input
        aria-label="timeout in seconds from now"
        type="number"
        min="1"
        max="2592000"
        value={secs}
        onInput={(e) => setSecs((e.target as HTMLInputElement).value)}
      />
      <button type="submit" disabled={!!busy}>
        {busy === 'timeout' ? 'Setting…' : 'Set timeout'}
      </button>
    </form>
  );
}
