// Sign-in form; the session cookie is HttpOnly, the CSRF token comes back in the body.

import { useState } from 'preact/hooks';
import { ApiError, api, type Session } from '../api';
import { Logo } from '../app';
import { Button, ErrorBox, Field, asApiError } from '../ui';

export function LoginPage({ onLogin }: { onLogin: (s: Session) => void }) {
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | null>(null);

  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      onLogin(await api.login(username.trim(), password));
    } catch (err) {
      const apiErr = asApiError(err);
      // A wrong password is the common case: say it plainly.
      setError(apiErr.status === 401 ? new ApiError(401, apiErr.code, 'Wrong username or password.') : apiErr);
      setPassword('');
    } finally {
      setBusy(false);
    }
  };

  return (
    <div class="login">
      <div class="login-card">
        <div class="login-brand">
          <Logo />
          <span>modelgate</span>
        </div>
        <h1>Sign in to the console</h1>
        <p class="muted">Manage providers, channels, applications and keys of your model gateway.</p>
        <form class="form" onSubmit={submit}>
          {error && <ErrorBox error={error} />}
          <Field label="Username">
            <input name="username" autoComplete="username" required autoFocus value={username}
              onInput={(e) => setUsername(e.currentTarget.value)} />
          </Field>
          <Field label="Password">
            <input name="password" type="password" autoComplete="current-password" required value={password}
              onInput={(e) => setPassword(e.currentTarget.value)} />
          </Field>
          <Button variant="primary" type="submit" busy={busy} class="btn-block">Sign in</Button>
        </form>
        <p class="muted small login-note">
          The first administrator, <code>admin</code>, is created when the gateway first starts; its password is printed once in the gateway's output.
        </p>
      </div>
    </div>
  );
}
