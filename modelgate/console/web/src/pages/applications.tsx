// Applications (timeout, authorised channels) and their gateway keys.

import { useState } from 'preact/hooks';
import { api, type ApiKey, type Application, type Channel, type CreatedKey } from '../api';
import { isAdmin, useSession } from '../app';
import { dateTime, relative } from '../format';
import {
  Badge, Button, Card, Confirm, CopyButton, Empty, Field, FormModal, Icon, Loader, Modal, PageHeader, StatusDot,
  Table, asApiError, errorText, toast, useAction, useLoad,
} from '../ui';

interface Data {
  apps: Application[];
  channels: Channel[];
}

type Dialog =
  | { type: 'app'; app?: Application }
  | { type: 'delete-app'; app: Application }
  | { type: 'key'; app: Application }
  | { type: 'created'; created: CreatedKey }
  | { type: 'delete-key'; key: ApiKey }
  | { type: 'rate'; key: ApiKey }
  | null;

export function ApplicationsPage() {
  const admin = isAdmin(useSession());
  const state = useLoad<Data>(async () => {
    const [apps, channels] = await Promise.all([
      api.get<Application[]>('/applications'),
      admin ? api.get<Channel[]>('/channels') : Promise.resolve([]),
    ]);
    return { apps, channels };
  }, [admin]);
  const [selected, setSelected] = useState<number | null>(null);
  const [dialog, setDialog] = useState<Dialog>(null);
  const [keysTick, setKeysTick] = useState(0);
  const close = () => setDialog(null);

  const apps = state.data?.apps ?? [];
  const current = apps.find((a) => a.id === selected) ?? apps[0];

  return (
    <>
      <PageHeader title="Applications & keys"
        subtitle="Each application has its own timeout, authorised channels and gateway keys (sk-…)."
        actions={<Button variant="primary" icon="plus" onClick={() => setDialog({ type: 'app' })}>New application</Button>} />
      <Loader state={state}>{(data) => (
        <>
          <Card title="Applications" flush>
            <AppsTable data={data} current={current} onSelect={setSelected} onDialog={setDialog} />
          </Card>
          {current && (
            <KeysCard key={`${current.id}-${keysTick}`} app={current} onDialog={setDialog} />
          )}
        </>
      )}</Loader>

      {dialog?.type === 'app' && state.data && (
        <AppForm app={dialog.app} channels={state.data.channels} admin={admin} onClose={close} onDone={(a) => {
          toast(dialog.app ? 'Application saved' : `Application “${a.name}” created`);
          setSelected(a.id);
          close();
          state.reload();
        }} />
      )}
      {dialog?.type === 'delete-app' && (
        <Confirm title="Delete application" danger confirmText="Delete application" onClose={close}
          message={<>Delete <strong>{dialog.app.name}</strong>? Its keys stop working immediately.</>}
          onConfirm={async () => {
            try {
              await api.del(`/applications/${dialog.app.id}`);
              toast('Application deleted');
              setSelected(null);
              close();
              state.reload();
            } catch (err) {
              toast(errorText(asApiError(err)), 'error');
            }
          }} />
      )}
      {dialog?.type === 'key' && (
        <KeyForm app={dialog.app} onClose={close} onCreated={(created) => {
          setKeysTick((t) => t + 1);
          setDialog({ type: 'created', created });
        }} />
      )}
      {dialog?.type === 'created' && <NewKeyDialog created={dialog.created} onClose={close} />}
      {dialog?.type === 'rate' && (
        <RateLimitForm apiKey={dialog.key} onClose={close} onDone={() => {
          toast('Rate limit saved');
          close();
          setKeysTick((t) => t + 1);
        }} />
      )}
      {dialog?.type === 'delete-key' && (
        <Confirm title="Delete key" danger confirmText="Delete key" onClose={close}
          message={<>Delete key <code>{dialog.key.prefix}</code>? It can never authenticate again; this cannot be undone.</>}
          onConfirm={async () => {
            try {
              await api.del(`/keys/${dialog.key.id}`);
              toast('Key deleted');
              close();
              setKeysTick((t) => t + 1);
            } catch (err) {
              toast(errorText(asApiError(err)), 'error');
            }
          }} />
      )}
    </>
  );
}

function AppsTable({ data, current, onSelect, onDialog }: { data: Data; current: Application | undefined;
  onSelect: (id: number) => void; onDialog: (d: Dialog) => void }) {
  const channelNames = new Map(data.channels.map((c) => [c.id, c.name]));
  return (
    <Table label="Applications" rows={data.apps} rowKey={(a) => a.id}
      empty={<Empty title="No applications yet" hint="Create one to issue gateway keys to a team or a service."
        action={<Button variant="primary" icon="plus" onClick={() => onDialog({ type: 'app' })}>New application</Button>} />}
      columns={[
        {
          title: 'Application',
          render: (a) => (
            <button type="button" class={a.id === current?.id ? 'link-btn selected' : 'link-btn'} onClick={() => onSelect(a.id)}>
              <strong>{a.name}</strong>
              {a.description && <span class="muted small">{a.description}</span>}
            </button>
          ),
        },
        { title: 'Timeout', align: 'right', render: (a) => `${a.timeout} s` },
        {
          title: 'Authorised channels',
          render: (a) => (a.channelIds.length
            ? <div class="chips">{a.channelIds.map((id) => <Badge key={id} tone="blue">{channelNames.get(id) ?? `#${id}`}</Badge>)}</div>
            : <span class="muted">none: calls are refused</span>),
        },
        { title: 'Status', render: (a) => <StatusDot on={a.enabled} /> },
        {
          title: '',
          align: 'right',
          render: (a) => (
            <div class="row-actions">
              <Button size="sm" onClick={() => onSelect(a.id)}>Keys</Button>
              <Button size="sm" variant="ghost" onClick={() => onDialog({ type: 'app', app: a })}>Edit</Button>
              <Button size="sm" variant="ghost" icon="trash" aria-label={`Delete application ${a.name}`}
                onClick={() => onDialog({ type: 'delete-app', app: a })} />
            </div>
          ),
        },
      ]} />
  );
}

function AppForm({ app, channels, admin, onClose, onDone }: { app?: Application; channels: Channel[]; admin: boolean;
  onClose: () => void; onDone: (a: Application) => void }) {
  const [name, setName] = useState(app?.name ?? '');
  const [description, setDescription] = useState(app?.description ?? '');
  const [timeout, setTimeout_] = useState(String(app?.timeout ?? 120));
  const [enabled, setEnabled] = useState(app?.enabled ?? true);
  const [chosen, setChosen] = useState<Set<number>>(new Set(app?.channelIds ?? []));
  const flip = (id: number) => {
    const next = new Set(chosen);
    if (next.has(id)) next.delete(id);
    else next.add(id);
    setChosen(next);
  };
  return (
    <FormModal title={app ? `Edit ${app.name}` : 'New application'} submitText={app ? 'Save' : 'Create application'}
      onClose={onClose} wide onSubmit={async () => {
        const fields = { name: name.trim(), description, timeout: Number(timeout), enabled };
        if (app) {
          let saved = await api.patch<Application>(`/applications/${app.id}`, fields);
          if (admin) saved = await api.put<Application>(`/applications/${app.id}/channels`, { channelIds: [...chosen] });
          onDone(saved);
        } else {
          onDone(await api.post<Application>('/applications', { ...fields, channelIds: admin ? [...chosen] : [] }));
        }
      }}>
      <Field label="Name">
        <input name="name" required value={name} onInput={(e) => setName(e.currentTarget.value)} />
      </Field>
      <Field label="Timeout (seconds)" hint="Bounds a whole call, retries included.">
        <input name="timeout" type="number" min={1} step="any" required value={timeout}
          onInput={(e) => setTimeout_(e.currentTarget.value)} />
      </Field>
      <Field label="Description" wide>
        <input name="description" value={description} placeholder="optional"
          onInput={(e) => setDescription(e.currentTarget.value)} />
      </Field>
      <label class="check field-wide">
        <input type="checkbox" checked={enabled} onChange={(e) => setEnabled(e.currentTarget.checked)} />
        Enabled
      </label>
      {admin && (
        <fieldset class="field-wide checks">
          <legend>Authorised channels</legend>
          {channels.length === 0 && <p class="muted small">No channels exist yet.</p>}
          {channels.map((c) => (
            <label class="check" key={c.id}>
              <input type="checkbox" name="channel" value={c.id} checked={chosen.has(c.id)} onChange={() => flip(c.id)} />
              <span><strong>{c.name}</strong> <span class="muted small">{c.models.map((m) => m.modelId).join(', ')}</span></span>
            </label>
          ))}
        </fieldset>
      )}
    </FormModal>
  );
}

const KEY_TONE = { ENABLED: 'green', DISABLED: 'gray', DELETED: 'red' } as const;

function KeysCard({ app, onDialog }: { app: Application; onDialog: (d: Dialog) => void }) {
  const keys = useLoad(() => api.get<ApiKey[]>(`/applications/${app.id}/keys`), [app.id]);
  const { run } = useAction();
  const toggle = (k: ApiKey) =>
    run(() => api.post(`/keys/${k.id}/${k.status === 'ENABLED' ? 'disable' : 'enable'}`),
      k.status === 'ENABLED' ? 'Key disabled' : 'Key enabled').then(keys.reload);
  return (
    <Card title={<>Keys of <span class="accent">{app.name}</span></>} flush
      actions={<Button variant="primary" size="sm" icon="plus" onClick={() => onDialog({ type: 'key', app })}>Create key</Button>}>
      <Loader state={keys}>{(list) => (
        <Table label="Keys" rows={list} rowKey={(k) => k.id}
          empty={<Empty title="No keys yet" hint="Create a key and give it to the service that calls the gateway." />}
          columns={[
            { title: 'Key', render: (k) => <code>{k.prefix}</code> },
            { title: 'Name', render: (k) => k.name || <span class="muted">—</span> },
            { title: 'Status', render: (k) => <Badge tone={KEY_TONE[k.status]}>{k.status.toLowerCase()}</Badge> },
            {
              title: 'Rate limit',
              render: (k) => (k.rateCapacity ? `${k.rateCapacity} burst · ${k.rateRefillPerSecond}/s` : <span class="muted">default</span>),
            },
            { title: 'Created', render: (k) => dateTime(k.createdAt) },
            { title: 'Last used', render: (k) => relative(k.lastUsedAt) },
            {
              title: '',
              align: 'right',
              render: (k) => (
                <div class="row-actions">
                  <Button size="sm" variant="ghost" onClick={() => onDialog({ type: 'rate', key: k })}>Rate limit</Button>
                  <Button size="sm" onClick={() => toggle(k)}>{k.status === 'ENABLED' ? 'Disable' : 'Enable'}</Button>
                  <Button size="sm" variant="ghost" icon="trash" aria-label={`Delete key ${k.prefix}`}
                    onClick={() => onDialog({ type: 'delete-key', key: k })} />
                </div>
              ),
            },
          ]} />
      )}</Loader>
    </Card>
  );
}

// A key's own token bucket; empty fields fall back to the gateway-wide default.
export function RateLimitForm({ apiKey, onClose, onDone }: { apiKey: ApiKey; onClose: () => void; onDone: () => void }) {
  const [capacity, setCapacity] = useState(apiKey.rateCapacity === null ? '' : String(apiKey.rateCapacity));
  const [refill, setRefill] = useState(apiKey.rateRefillPerSecond === null ? '' : String(apiKey.rateRefillPerSecond));
  return (
    <FormModal title={`Rate limit of ${apiKey.prefix}…`} submitText="Save" onClose={onClose} onSubmit={async () => {
      await api.patch(`/keys/${apiKey.id}`, {
        rateCapacity: capacity ? Number(capacity) : null, rateRefillPerSecond: refill ? Number(refill) : null,
      });
      onDone();
    }}>
      <Field label="Burst (requests)" hint="Token bucket size. Empty: the gateway default.">
        <input name="rateCapacity" type="number" min={1} step="any" value={capacity} onInput={(e) => setCapacity(e.currentTarget.value)} />
      </Field>
      <Field label="Refill per second" hint="Sustained requests per second. Empty: the gateway default.">
        <input name="rateRefillPerSecond" type="number" min={0.001} step="any" value={refill} onInput={(e) => setRefill(e.currentTarget.value)} />
      </Field>
    </FormModal>
  );
}

function KeyForm({ app, onClose, onCreated }: { app: Application; onClose: () => void;
  onCreated: (c: CreatedKey) => void }) {
  const [name, setName] = useState('');
  return (
    <FormModal title={`Create key for ${app.name}`} submitText="Create key" onClose={onClose} onSubmit={async () => {
      onCreated(await api.post<CreatedKey>(`/applications/${app.id}/keys`, { name: name.trim() }));
    }}>
      <Field label="Name" wide hint="Helps you recognise the key later, e.g. the service that uses it.">
        <input name="keyName" value={name} placeholder="optional" onInput={(e) => setName(e.currentTarget.value)} />
      </Field>
    </FormModal>
  );
}

// The plaintext exists in this dialog only; closing it drops the last copy the console holds.
function NewKeyDialog({ created, onClose }: { created: CreatedKey; onClose: () => void }) {
  return (
    <Modal title="Your new API key" onClose={onClose} closeOnBackdrop={false} footer={
      <Button variant="primary" onClick={onClose}>I have stored the key</Button>
    }>
      <div class="warning" role="alert">
        <Icon name="alert" />
        <span>Copy this key now. It is shown <strong>only once</strong> and cannot be recovered; if it is lost, create a new key and delete this one.</span>
      </div>
      <div class="secret">
        <code data-testid="new-key">{created.plaintext}</code>
        <CopyButton text={created.plaintext} />
      </div>
      <p class="muted small">
        Use it as <code>Authorization: Bearer …</code> on <code>/v1/chat/completions</code>, or as
        <code> x-api-key</code> on <code>/alt/v1/messages</code>.
      </p>
    </Modal>
  );
}
