// Console users and their roles (ADMIN only).

import { useState } from 'preact/hooks';
import { api, type Role, type User } from '../api';
import { useSession } from '../app';
import { dateTime } from '../format';
import {
  Badge, Button, Card, Confirm, Field, FormModal, Loader, PageHeader, StatusDot, Table, asApiError, errorText, toast,
  useAction, useLoad,
} from '../ui';

type Dialog = { type: 'create' } | { type: 'password'; user: User } | { type: 'delete'; user: User } | null;

export function UsersPage() {
  const me = useSession().user;
  const users = useLoad(() => api.get<User[]>('/users'), []);
  const [dialog, setDialog] = useState<Dialog>(null);
  const { run } = useAction();
  const close = () => setDialog(null);
  const patch = (u: User, body: Partial<Pick<User, 'role' | 'enabled'>>, message: string) =>
    run(() => api.patch(`/users/${u.id}`, body), message).then(users.reload);

  return (
    <>
      <PageHeader title="Users" subtitle="Administrators manage everything; users manage their own applications and keys."
        actions={<Button variant="primary" icon="plus" onClick={() => setDialog({ type: 'create' })}>Add user</Button>} />
      <Card flush>
        <Loader state={users}>{(list) => (
          <Table label="Users" rows={list} rowKey={(u) => u.id}
            columns={[
              { title: 'User', render: (u) => <strong>{u.username}{u.id === me.id && <span class="muted"> (you)</span>}</strong> },
              { title: 'Role', render: (u) => <Badge tone={u.role === 'ADMIN' ? 'violet' : 'gray'}>{u.role}</Badge> },
              { title: 'Status', render: (u) => <StatusDot on={u.enabled} /> },
              { title: 'Created', render: (u) => dateTime(u.createdAt) },
              {
                title: '',
                align: 'right',
                render: (u) => u.id === me.id ? null : (
                  <div class="row-actions">
                    <Button size="sm" onClick={() => patch(u, { role: u.role === 'ADMIN' ? 'USER' : 'ADMIN' },
                      `${u.username} is now ${u.role === 'ADMIN' ? 'a user' : 'an administrator'}`)}>
                      {u.role === 'ADMIN' ? 'Make user' : 'Make admin'}
                    </Button>
                    <Button size="sm" onClick={() => patch(u, { enabled: !u.enabled }, u.enabled ? 'User disabled' : 'User enabled')}>
                      {u.enabled ? 'Disable' : 'Enable'}
                    </Button>
                    <Button size="sm" variant="ghost" onClick={() => setDialog({ type: 'password', user: u })}>Reset password</Button>
                    <Button size="sm" variant="ghost" icon="trash" aria-label={`Delete user ${u.username}`}
                      onClick={() => setDialog({ type: 'delete', user: u })} />
                  </div>
                ),
              },
            ]} />
        )}</Loader>
      </Card>

      {dialog?.type === 'create' && <UserForm onClose={close} onDone={() => { close(); users.reload(); }} />}
      {dialog?.type === 'password' && (
        <PasswordForm user={dialog.user} onClose={close} onDone={() => { toast('Password changed; their sessions ended'); close(); }} />
      )}
      {dialog?.type === 'delete' && (
        <Confirm title="Delete user" danger confirmText="Delete user" onClose={close}
          message={<>Delete <strong>{dialog.user.username}</strong>? They are signed out at once.</>}
          onConfirm={async () => {
            try {
              await api.del(`/users/${dialog.user.id}`);
              toast('User deleted');
              close();
              users.reload();
            } catch (err) {
              toast(errorText(asApiError(err)), 'error');
            }
          }} />
      )}
    </>
  );
}

function UserForm({ onClose, onDone }: { onClose: () => void; onDone: () => void }) {
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [role, setRole] = useState<Role>('USER');
  return (
    <FormModal title="Add user" submitText="Add user" onClose={onClose} onSubmit={async () => {
      await api.post('/users', { username: username.trim(), password, role });
      toast(`User ${username.trim()} added`);
      onDone();
    }}>
      <Field label="Username">
        <input name="username" required autoComplete="off" value={username} onInput={(e) => setUsername(e.currentTarget.value)} />
      </Field>
      <Field label="Role">
        <select name="role" value={role} onChange={(e) => setRole(e.currentTarget.value as Role)}>
          <option value="USER">User</option>
          <option value="ADMIN">Administrator</option>
        </select>
      </Field>
      <Field label="Password" wide hint="At least 8 characters. Share it privately; they can change it later.">
        <input name="password" type="password" required minLength={8} autoComplete="new-password" value={password}
          onInput={(e) => setPassword(e.currentTarget.value)} />
      </Field>
    </FormModal>
  );
}

function PasswordForm({ user, onClose, onDone }: { user: User; onClose: () => void; onDone: () => void }) {
  const [password, setPassword] = useState('');
  return (
    <FormModal title={`Reset password of ${user.username}`} submitText="Set password" onClose={onClose} onSubmit={async () => {
      await api.patch(`/users/${user.id}`, { password });
      onDone();
    }}>
      <Field label="New password" wide hint="At least 8 characters.">
        <input name="password" type="password" required minLength={8} autoComplete="new-password" value={password}
          onInput={(e) => setPassword(e.currentTarget.value)} />
      </Field>
    </FormModal>
  );
}
