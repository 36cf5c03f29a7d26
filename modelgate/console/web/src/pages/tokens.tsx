// Management API tokens: for scripts and CI (Authorization: Bearer mgt_…), shown once.

import { useState } from 'preact/hooks';
import { api, type ApiToken, type CreatedApiToken } from '../api';
import { dateTime, relative } from '../format';
import {
  Badge, Button, Card, Confirm, CopyButton, Empty, Field, FormModal, Icon, Loader, Modal, PageHeader, Table,
  asApiError, errorText, toast, useLoad,
} from '../ui';

type Dialog = { type: 'create' } | { type: 'created'; created: CreatedApiToken } | { type: 'revoke'; token: ApiToken }
  | null;

export function TokensPage() {
  const state = useLoad(() => api.get<ApiToken[]>('/api-tokens'), []);
  const [dialog, setDialog] = useState<Dialog>(null);
  const close = () => setDialog(null);
  return (
    <>
      <PageHeader title="API tokens"
        subtitle="Tokens let scripts and CI use the management API (and modelgate --url) without a password."
        actions={<Button variant="primary" icon="plus" onClick={() => setDialog({ type: 'create' })}>Create token</Button>} />
      <Card flush>
        <Loader state={state}>{(tokens) => (
          <Table label="API tokens" rows={tokens} rowKey={(t) => t.id}
            empty={<Empty title="No API tokens" hint="Create one for a deployment script or a CI job." />}
            columns={[
              { title: 'Name', render: (t) => <strong>{t.name}</strong> },
              { title: 'Token', render: (t) => <code>{t.prefix}…</code> },
              { title: 'Role', render: (t) => <Badge tone={t.role === 'ADMIN' ? 'violet' : 'blue'}>{t.role}</Badge> },
              { title: 'Created', render: (t) => <span class="nowrap">{dateTime(t.createdAt)} · {t.createdBy}</span> },
              { title: 'Expires', render: (t) => (t.expiresAt ? <span class="nowrap">{dateTime(t.expiresAt)}</span> : <span class="muted">never</span>) },
              { title: 'Last used', render: (t) => <span class="nowrap">{relative(t.lastUsedAt)}</span> },
              {
                title: 'Status',
                render: (t) => (t.revokedAt
                  ? <Badge tone="red" title={`revoked ${dateTime(t.revokedAt)}`}>revoked</Badge>
                  : t.expiresAt && new Date(t.expiresAt) < new Date() ? <Badge tone="gray">expired</Badge>
                    : <Badge tone="green">active</Badge>),
              },
              {
                title: '',
                align: 'right',
                render: (t) => (!t.revokedAt && (
                  <div class="row-actions">
                    <Button size="sm" variant="danger" onClick={() => setDialog({ type: 'revoke', token: t })}>Revoke</Button>
                  </div>
                )),
              },
            ]} />
        )}</Loader>
      </Card>
      {dialog?.type === 'create' && (
        <TokenForm onClose={close} onCreated={(created) => {
          state.reload();
          setDialog({ type: 'created', created });
        }} />
      )}
      {dialog?.type === 'created' && <NewTokenDialog created={dialog.created} onClose={close} />}
      {dialog?.type === 'revoke' && (
        <Confirm title="Revoke token" danger confirmText="Revoke token" onClose={close}
          message={<>Revoke <strong>{dialog.token.name}</strong>? Scripts using it are refused at once.</>}
          onConfirm={async () => {
            try {
              await api.del(`/api-tokens/${dialog.token.id}`);
              toast('Token revoked');
              close();
              state.reload();
            } catch (err) {
              toast(errorText(asApiError(err)), 'error');
            }
          }} />
      )}
    </>
  );
}

function TokenForm({ onClose, onCreated }: { onClose: () => void; onCreated: (c: CreatedApiToken) => void }) {
  const [name, setName] = useState('');
  const [role, setRole] = useState<'ADMIN' | 'USER'>('ADMIN');
  const [days, setDays] = useState('');
  return (
    <FormModal title="Create API token" submitText="Create token" onClose={onClose} onSubmit={async () => {
      onCreated(await api.post<CreatedApiToken>('/api-tokens', {
        name: name.trim(), role, expiresInDays: days ? Number(days) : null,
      }));
    }}>
      <Field label="Name" hint="What uses it, e.g. deploy pipeline.">
        <input name="tokenName" required value={name} onInput={(e) => setName(e.currentTarget.value)} />
      </Field>
      <Field label="Role" hint="USER tokens see only your own applications and usage.">
        <select name="role" value={role} onChange={(e) => setRole(e.currentTarget.value as 'ADMIN' | 'USER')}>
          <option value="ADMIN">ADMIN</option>
          <option value="USER">USER</option>
        </select>
      </Field>
      <Field label="Expires after (days)" hint="Empty: never.">
        <input name="expiresInDays" type="number" min={1} step="any" value={days} onInput={(e) => setDays(e.currentTarget.value)} />
      </Field>
    </FormModal>
  );
}

function NewTokenDialog({ created, onClose }: { created: CreatedApiToken; onClose: () => void }) {
  return (
    <Modal title="Your new API token" onClose={onClose} closeOnBackdrop={false} footer={
      <Button variant="primary" onClick={onClose}>I have stored the token</Button>
    }>
      <div class="warning" role="alert">
        <Icon name="alert" />
        <span>Copy this token now. It is shown <strong>only once</strong>; if it is lost, revoke it and create another.</span>
      </div>
      <div class="secret">
        <code data-testid="new-token">{created.plaintext}</code>
        <CopyButton text={created.plaintext} />
      </div>
      <p class="muted small">
        Send it as <code>Authorization: Bearer …</code> to <code>/api/v1</code>, or set
        <code> MODELGATE_TOKEN</code> for <code>modelgate --url</code>.
      </p>
    </Modal>
  );
}
