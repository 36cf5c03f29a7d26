// The shell: session bootstrap, login, sidebar navigation and the page outlet.

import { createContext } from 'preact';
import { useContext, useEffect, useState } from 'preact/hooks';
import { api, setCsrf, setUnauthorizedHandler, type Session } from './api';
import { href, navigate, onLinkClick, useRoute } from './router';
import { Field, FormModal, Icon, Loading, Toasts, toast, toastError } from './ui';
import { LoginPage } from './pages/login';
import { DashboardPage } from './pages/dashboard';
import { ProvidersPage } from './pages/providers';
import { ApplicationsPage } from './pages/applications';
import { CatalogPage } from './pages/catalog';
import { EventsPage } from './pages/events';
import { CallLogPage } from './pages/calls';
import { UsersPage } from './pages/users';
import { BlacklistPage } from './pages/blacklist';
import { TokensPage } from './pages/tokens';
import { AuditPage } from './pages/audit';

export const SessionContext = createContext<Session | null>(null);

export function useSession(): Session {
  return useContext(SessionContext)!;
}

export function isAdmin(session: Session): boolean {
  return session.user.role === 'ADMIN';
}

interface NavItem {
  route: string;
  label: string;
  icon: string;
  admin?: boolean;
  page: () => preact.JSX.Element;
}

const NAV: { section: string; items: NavItem[] }[] = [
  {
    section: 'Overview',
    items: [
      { route: 'dashboard', label: 'Dashboard', icon: 'dashboard', page: () => <DashboardPage /> },
      { route: 'calls', label: 'Call log', icon: 'list', page: () => <CallLogPage /> },
      { route: 'events', label: 'Resilience events', icon: 'activity', admin: true, page: () => <EventsPage /> },
    ],
  },
  {
    section: 'Configure',
    items: [
      { route: 'providers', label: 'Providers & channels', icon: 'server', admin: true, page: () => <ProvidersPage /> },
      { route: 'applications', label: 'Applications & keys', icon: 'key', page: () => <ApplicationsPage /> },
      { route: 'catalog', label: 'Plan catalog', icon: 'book', page: () => <CatalogPage /> },
    ],
  },
  {
    section: 'Administer',
    items: [
      { route: 'users', label: 'Users', icon: 'users', admin: true, page: () => <UsersPage /> },
      { route: 'blacklist', label: 'IP blacklist', icon: 'shield', admin: true, page: () => <BlacklistPage /> },
      { route: 'tokens', label: 'API tokens', icon: 'lock', admin: true, page: () => <TokensPage /> },
      { route: 'audit', label: 'Audit log', icon: 'file', admin: true, page: () => <AuditPage /> },
    ],
  },
];

export function App() {
  const route = useRoute();
  const [session, setSession] = useState<Session | null | undefined>(undefined);

  useEffect(() => {
    // Any 401 (expired or revoked session) sends the user back to the login page.
    setUnauthorizedHandler(() => {
      setCsrf('');
      setSession(null);
    });
    api.me().then(
      (s) => {
        setCsrf(s.csrfToken);
        setSession(s);
      },
      () => setSession(null),
    );
  }, []);

  useEffect(() => {
    if (session === null && route !== 'login') navigate('login', true);
    if (session && (route === 'login' || route === '')) navigate('dashboard', true);
  }, [session, route]);

  if (session === undefined) return <div class="boot"><Loading /></div>;
  if (session === null) {
    return (
      <>
        <LoginPage onLogin={(s) => {
          setCsrf(s.csrfToken);
          setSession(s);
          navigate('dashboard', true);
        }} />
        <Toasts />
      </>
    );
  }
  return (
    <SessionContext.Provider value={session}>
      <Shell session={session} route={route} onLogout={() => {
        setCsrf('');
        setSession(null);
      }} />
      <Toasts />
    </SessionContext.Provider>
  );
}

function Shell({ session, route, onLogout }: { session: Session; route: string; onLogout: () => void }) {
  const [menuOpen, setMenuOpen] = useState(false);
  const [changingPassword, setChangingPassword] = useState(false);
  const admin = isAdmin(session);
  const sections = NAV.map((s) => ({ ...s, items: s.items.filter((i) => admin || !i.admin) }))
    .filter((s) => s.items.length > 0);
  const active = sections.flatMap((s) => s.items).find((i) => i.route === route.split('/')[0]);

  useEffect(() => setMenuOpen(false), [route]);

  const logout = async () => {
    try {
      await api.post('/auth/logout');
      toast('Signed out');
    } catch (err) {
      toastError(err);
    }
    onLogout();
  };

  return (
    <div class={menuOpen ? 'layout menu-open' : 'layout'}>
      <aside class="sidebar">
        <a class="brand" href={href('dashboard')} onClick={onLinkClick('dashboard')}>
          <Logo />
          <span>modelgate</span>
        </a>
        <nav aria-label="Main">
          {sections.map((s) => (
            <div class="nav-section" key={s.section}>
              <div class="nav-title">{s.section}</div>
              {s.items.map((item) => (
                <a key={item.route} href={href(item.route)} onClick={onLinkClick(item.route)}
                  class={item === active ? 'nav-link active' : 'nav-link'}
                  aria-current={item === active ? 'page' : undefined}>
                  <Icon name={item.icon} />
                  {item.label}
                </a>
              ))}
            </div>
          ))}
        </nav>
        <div class="sidebar-foot">
          <div class="avatar" aria-hidden="true">{session.user.username.slice(0, 1).toUpperCase()}</div>
          <div class="who">
            <strong>{session.user.username}</strong>
            <span>{session.user.role === 'ADMIN' ? 'Administrator' : 'User'}</span>
          </div>
          <button type="button" class="icon-btn" title="Change password" aria-label="Change password"
            onClick={() => setChangingPassword(true)}>
            <Icon name="lock" />
          </button>
          <button type="button" class="icon-btn" title="Sign out" aria-label="Sign out" onClick={logout}>
            <Icon name="logout" />
          </button>
        </div>
      </aside>
      <div class="scrim" onClick={() => setMenuOpen(false)} />
      <div class="main">
        <div class="topbar">
          <button type="button" class="icon-btn" aria-label="Open menu" onClick={() => setMenuOpen(true)}>
            <Icon name="menu" />
          </button>
          <span class="brand-small"><Logo /> modelgate</span>
        </div>
        <main class="content">
          {active ? active.page() : <NotFound />}
        </main>
      </div>
      {changingPassword && <PasswordForm onClose={() => setChangingPassword(false)} />}
    </div>
  );
}

// Your own password; other sessions of this user end, this one stays.
function PasswordForm({ onClose }: { onClose: () => void }) {
  const [current, setCurrent] = useState('');
  const [next, setNext] = useState('');
  const [repeat, setRepeat] = useState('');
  return (
    <FormModal title="Change your password" submitText="Change password" onClose={onClose} onSubmit={async () => {
      if (next !== repeat) throw new Error('The new passwords do not match');
      await api.post('/auth/password', { currentPassword: current, newPassword: next });
      toast('Password changed; your other sessions were signed out');
      onClose();
    }}>
      <Field label="Current password" wide>
        <input name="currentPassword" type="password" autoComplete="current-password" required value={current}
          onInput={(e) => setCurrent(e.currentTarget.value)} />
      </Field>
      <Field label="New password" wide hint="At least 8 characters.">
        <input name="newPassword" type="password" autoComplete="new-password" required minLength={8} value={next}
          onInput={(e) => setNext(e.currentTarget.value)} />
      </Field>
      <Field label="Repeat new password" wide>
        <input name="repeatPassword" type="password" autoComplete="new-password" required minLength={8} value={repeat}
          onInput={(e) => setRepeat(e.currentTarget.value)} />
      </Field>
    </FormModal>
  );
}

function NotFound() {
  return (
    <div class="empty">
      <strong>Page not found</strong>
      <p class="muted">This page does not exist or needs the administrator role.</p>
      <a class="btn btn-primary btn-md" href={href('dashboard')} onClick={onLinkClick('dashboard')}>Go to dashboard</a>
    </div>
  );
}

export function Logo() {
  return (
    <svg class="logo" viewBox="0 0 32 32" width="28" height="28" aria-hidden="true">
      <rect width="32" height="32" rx="8" fill="#4f46e5" />
      <path d="M9 22V10l7 7 7-7v12" stroke="#fff" stroke-width="3" fill="none" stroke-linecap="round"
        stroke-linejoin="round" />
    </svg>
  );
}
