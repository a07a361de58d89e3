import { useEffect, useState } from 'preact/hooks';
import { describeError } from './api.js';
import { live, startLive, stopLive } from './live.js';
import { href, useRoute } from './router.js';
import { session } from './session.js';
import { useStore } from './store.js';
import { Catalog } from './views/Catalog.js';
import { Login } from './views/Login.js';
import { Nodes } from './views/Nodes.js';
import { Overview } from './views/Overview.js';
import { SandboxDetail } from './views/SandboxDetail.js';
import { Sandboxes } from './views/Sandboxes.js';
import { TemplateDetail } from './views/TemplateDetail.js';

const NAV = [
  { view: '', label: 'Overview' },
  { view: 'nodes', label: 'Nodes' },
  { view: 'sandboxes', label: 'Sandboxes' },
  { view: 'catalog', label: 'Snapshots & templates' },
];

export function App() {
  const [signedIn, setSignedIn] = useState(() => session.get() !== null);
  const [notice, setNotice] = useState('');
  const status = useStore(live.status);

  useEffect(() => {
    if (!signedIn) return;
    startLive().catch((err: unknown) => {
      // A key that stopped working (the node's key was changed) sends the person back to sign in.
      session.clear();
      setNotice(describeError(err));
      setSignedIn(false);
    });
    return stopLive;
  }, [signedIn]);

  useEffect(() => {
    if (status.state === 'closed' && status.detail) {
      session.clear();
      setNotice(`Signed out: ${status.detail}`);
      setSignedIn(false);
    }
  }, [status]);

  if (!signedIn) return <Login onLogin={() => setSignedIn(true)} notice={notice} />;
  return (
    <Shell
      onSignOut={() => {
        session.clear();
        setNotice('');
        setSignedIn(false);
      }}
    />
  );
}

function Shell({ onSignOut }: { onSignOut: () => void }) {
  const route = useRoute();
  const status = useStore(live.status);
  const section = route.view === 'templates' ? 'catalog' : route.view;
  return (
    <>
      <header class="top">
        <a class="brand" href={href('')}>
          AgentENV
        </a>
        <nav aria-label="Views">
          {NAV.map((n) => (
            <a
              key={n.view}
              href={href(n.view)}
              class={section === n.view ? 'active' : ''}
              aria-current={section === n.view ? 'page' : undefined}
            >
              {n.label}
            </a>
          ))}
        </nav>
        <span class={`live live-${status.state}`} title={`live updates: ${status.state}`} data-testid="live">
          {status.state === 'open' ? 'live' : status.state}
        </span>
        <button type="button" class="link" onClick={onSignOut}>
          Sign out
        </button>
      </header>
      <main>
        <View route={route} />
      </main>
    </>
  );
}

function View({ route }: { route: ReturnType<typeof useRoute> }) {
  switch (route.view) {
    case 'nodes':
      return <Nodes />;
    case 'sandboxes':
      return route.id ? <SandboxDetail id={route.id} key={route.id} /> : <Sandboxes route={route} />;
    case 'catalog':
      return <Catalog />;
    case 'templates':
      return route.id ? <TemplateDetail id={route.id} key={route.id} /> : <Catalog />;
    default:
      return <Overview />;
  }
}
