// Providers (upstream accounts and their encrypted keys) and channels (the routes calls take).

import { useState } from 'preact/hooks';
import {
  api, type Breaker, type Channel, type HealthCheck, type Provider, type ProviderKind,
} from '../api';
import { dateTime, ms } from '../format';
import {
  Badge, Button, Card, Confirm, Empty, Field, FormModal, Loader, PageHeader, StatusDot, Table, asApiError, errorText,
  toast, useAction, useLoad,
} from '../ui';

interface Data {
  providers: Provider[];
  channels: Channel[];
  kinds: ProviderKind[];
}

async function loadAll(): Promise<Data> {
  const [providers, channels, kinds] = await Promise.all([
    api.get<Provider[]>('/providers'),
    api.get<Channel[]>('/channels'),
    api.get<ProviderKind[]>('/providers/kinds'),
  ]);
  return { providers, channels, kinds };
}

type Dialog =
  | { type: 'provider' }
  | { type: 'key'; provider: Provider }
  | { type: 'edit-provider'; provider: Provider }
  | { type: 'delete-provider'; provider: Provider }
  | { type: 'channel' }
  | { type: 'edit-channel'; channel: Channel }
  | { type: 'delete-channel'; channel: Channel }
  | null;

export function ProvidersPage() {
  const state = useLoad(loadAll, []);
  const [dialog, setDialog] = useState<Dialog>(null);
  const close = () => setDialog(null);
  const done = (message: string) => {
    toast(message);
    close();
    state.reload();
  };

  return (
    <>
      <PageHeader title="Providers & channels"
        subtitle="A provider is an upstream account with its keys; a channel routes a set of models to a provider."
        actions={<>
          <Button icon="plus" onClick={() => setDialog({ type: 'provider' })}>Add provider</Button>
          <Button variant="primary" icon="plus" onClick={() => setDialog({ type: 'channel' })}
            disabled={!state.data?.providers.length}>Add channel</Button>
        </>} />
      <Loader state={state}>{(data) => (
        <>
          <ProvidersCard data={data} onDialog={setDialog} reload={state.reload} />
          <ChannelsCard data={data} onDialog={setDialog} reload={state.reload} />
        </>
      )}</Loader>

      {dialog?.type === 'provider' && state.data && (
        <ProviderForm kinds={state.data.kinds} onClose={close} onDone={(p) => done(`Provider “${p.name}” added`)} />
      )}
      {dialog?.type === 'edit-provider' && state.data && (
        <ProviderEditForm provider={state.data.providers.find((p) => p.id === dialog.provider.id) ?? dialog.provider}
          kind={state.data.kinds.find((k) => k.kind === dialog.provider.kind)} onClose={close}
          onChanged={state.reload} onDone={(p) => done(`Provider “${p.name}” saved`)} />
      )}
      {dialog?.type === 'key' && (
        <KeyForm provider={dialog.provider} onClose={close} onDone={() => done('Upstream key added')} />
      )}
      {dialog?.type === 'delete-provider' && (
        <Confirm title="Delete provider" danger confirmText="Delete provider" onClose={close}
          message={<>Delete <strong>{dialog.provider.name}</strong> and its stored keys? Channels using it must be deleted first.</>}
          onConfirm={async () => {
            try {
              await api.del(`/providers/${dialog.provider.id}`);
              done('Provider deleted');
            } catch (err) {
              toast(errorText(asApiError(err)), 'error');
            }
          }} />
      )}
      {dialog?.type === 'channel' && state.data && (
        <ChannelForm providers={state.data.providers} onClose={close}
          onDone={(c) => done(`Channel “${c.name}” added`)} />
      )}
      {dialog?.type === 'edit-channel' && state.data && (
        <ChannelForm providers={state.data.providers} channel={dialog.channel} onClose={close}
          onDone={(c) => done(`Channel “${c.name}” saved`)} />
      )}
      {dialog?.type === 'delete-channel' && (
        <Confirm title="Delete channel" danger confirmText="Delete channel" onClose={close}
          message={<>Delete <strong>{dialog.channel.name}</strong>? Applications lose access to its models.</>}
          onConfirm={async () => {
            try {
              await api.del(`/channels/${dialog.channel.id}`);
              done('Channel deleted');
            } catch (err) {
              toast(errorText(asApiError(err)), 'error');
            }
          }} />
      )}
    </>
  );
}

// --- providers ------------------------------------------------------------------------------------

function ProvidersCard({ data, onDialog, reload }: { data: Data; onDialog: (d: Dialog) => void; reload: () => void }) {
  const { run } = useAction();
  const labels = new Map(data.kinds.map((k) => [k.kind, k.label]));
  const toggle = (p: Provider) =>
    run(() => api.patch(`/providers/${p.id}`, { enabled: !p.enabled }), p.enabled ? 'Provider disabled' : 'Provider enabled')
      .then(reload);
  return (
    <Card title="Providers" flush>
      <Table label="Providers" rows={data.providers} rowKey={(p) => p.id}
        empty={<Empty title="No providers yet" hint="Add the upstream account your models come from."
          action={<Button variant="primary" icon="plus" onClick={() => onDialog({ type: 'provider' })}>Add provider</Button>} />}
        columns={[
          { title: 'Name', render: (p) => <strong>{p.name}</strong> },
          { title: 'Kind', render: (p) => <span title={p.kind}>{labels.get(p.kind) ?? p.kind}</span> },
          { title: 'Base URL', render: (p) => <code class="truncate" title={p.baseUrl}>{p.baseUrl}</code> },
          {
            title: 'Upstream keys',
            render: (p) => (p.keys.length
              ? <div class="chips">{p.keys.map((k) => (
                  <Badge key={k.id} tone={k.enabled ? 'blue' : 'gray'} title={k.label || undefined}>{k.hint ? `••••${k.hint}` : k.label || `key #${k.id}`}</Badge>
                ))}</div>
              : <span class="muted">none</span>),
          },
          { title: 'Status', render: (p) => <StatusDot on={p.enabled} /> },
          {
            title: '',
            align: 'right',
            render: (p) => (
              <div class="row-actions">
                <Button size="sm" variant="ghost" onClick={() => onDialog({ type: 'edit-provider', provider: p })}>Edit</Button>
                <Button size="sm" onClick={() => onDialog({ type: 'key', provider: p })}>Add key</Button>
                <Button size="sm" onClick={() => toggle(p)}>{p.enabled ? 'Disable' : 'Enable'}</Button>
                <Button size="sm" variant="ghost" icon="trash" aria-label={`Delete provider ${p.name}`}
                  onClick={() => onDialog({ type: 'delete-provider', provider: p })} />
              </div>
            ),
          },
        ]} />
    </Card>
  );
}

// The options textarea: a JSON object, or empty for none.
function parseOptions(text: string): Record<string, unknown> {
  if (!text.trim()) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = null;
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new Error('Options must be a JSON object, e.g. {"num_ctx": 32768}');
  }
  return parsed as Record<string, unknown>;
}

function optionsAuth(text: string): unknown {
  try {
    return parseOptions(text).auth;
  } catch {
    return undefined;
  }
}

// Kind-specific settings, with the names the chosen kind reads.
function OptionsField({ kind, value, onInput }: { kind: ProviderKind | undefined; value: string;
  onInput: (value: string) => void }) {
  const names = kind?.options ?? [];
  return (
    <Field label="Options (JSON)" wide hint={<>
      {names.length
        ? <>Read by {kind?.label}: {names.map((n, i) => <span key={n}>{i ? ', ' : ''}<code>{n}</code></span>)}. </>
        : 'This kind reads no options. '}
      <a href="https://github.com/modelgate/modelgate/blob/main/docs/providers.md#provider-options" target="_blank"
        rel="noreferrer">What each does</a>
    </>}>
      <textarea name="options" rows={4} value={value} spellcheck={false}
        placeholder={names.length ? `{"${names[0]}": …}` : '{}'} onInput={(e) => onInput(e.currentTarget.value)} />
    </Field>
  );
}

function ProviderForm({ kinds, onClose, onDone }: { kinds: ProviderKind[]; onClose: () => void;
  onDone: (p: Provider) => void }) {
  const [kind, setKind] = useState(kinds[0]?.kind ?? '');
  const [name, setName] = useState('');
  const [baseUrl, setBaseUrl] = useState('');
  const [key, setKey] = useState('');
  const [options, setOptions] = useState('');
  const info = kinds.find((k) => k.kind === kind);
  // options.auth naming a cloud identity chain (aws, entra) needs no stored key
  const keyless = info?.keylessAuth.includes(String(optionsAuth(options)));
  const keyRequired = !!info?.keyRequired && !keyless;
  return (
    <FormModal title="Add provider" submitText="Add provider" wide onClose={onClose} onSubmit={async () => {
      const created = await api.post<Provider>('/providers', {
        name: name.trim(),
        kind,
        baseUrl: baseUrl.trim() || null,
        options: parseOptions(options),
        keys: key ? [key] : [],
      });
      onDone(created);
    }}>
      <Field label="Kind" hint={info && <a href={info.docsUrl} target="_blank" rel="noreferrer">API reference</a>}>
        <select name="kind" value={kind} onChange={(e) => setKind(e.currentTarget.value)}>
          {kinds.map((k) => <option key={k.kind} value={k.kind}>{k.label}</option>)}
        </select>
      </Field>
      <Field label="Name">
        <input name="name" required value={name} placeholder={`e.g. ${kind}-main`}
          onInput={(e) => setName(e.currentTarget.value)} />
      </Field>
      <Field label="Base URL" wide hint={info?.baseUrlNote || (info?.defaultBaseUrl ? 'Leave empty for the public endpoint.' : 'Required for this kind.')}>
        <input name="baseUrl" type="url" value={baseUrl} required={!info?.defaultBaseUrl}
          placeholder={info?.defaultBaseUrl ?? 'https://host/v1'} onInput={(e) => setBaseUrl(e.currentTarget.value)} />
      </Field>
      <OptionsField kind={info} value={options} onInput={setOptions} />
      <Field label="Upstream API key" wide
        hint={keyRequired ? 'Stored encrypted; only its last 4 characters are ever shown.'
          : keyless ? 'Not needed: the credentials come from the cloud identity chain the options name.'
            : 'Optional for this kind. Stored encrypted.'}>
        <input name="upstreamKey" type="password" autoComplete="off" value={key} required={keyRequired}
          onInput={(e) => setKey(e.currentTarget.value)} />
      </Field>
    </FormModal>
  );
}

// Base URL, options and the upstream keys of an existing provider (keys are never shown, only their hint).
function ProviderEditForm({ provider, kind, onClose, onChanged, onDone }: { provider: Provider;
  kind: ProviderKind | undefined; onClose: () => void; onChanged: () => void; onDone: (p: Provider) => void }) {
  const [name, setName] = useState(provider.name);
  const [baseUrl, setBaseUrl] = useState(provider.baseUrl);
  const [options, setOptions] = useState(Object.keys(provider.options).length
    ? JSON.stringify(provider.options, null, 2) : '');
  const { run } = useAction();
  const keyAction = (path: string, method: 'post' | 'del', message: string) =>
    run(() => (method === 'post' ? api.post(path) : api.del(path)), message).then(onChanged);
  return (
    <FormModal title={`Edit ${provider.name}`} submitText="Save" wide onClose={onClose} onSubmit={async () => {
      onDone(await api.patch<Provider>(`/providers/${provider.id}`, {
        name: name.trim(), baseUrl: baseUrl.trim(), options: parseOptions(options),
      }));
    }}>
      <Field label="Name">
        <input name="name" required value={name} onInput={(e) => setName(e.currentTarget.value)} />
      </Field>
      <Field label="Kind">
        <input name="kind" value={kind?.label ?? provider.kind} disabled />
      </Field>
      <Field label="Base URL" wide hint={kind?.baseUrlNote || (kind?.defaultBaseUrl ? `Public endpoint: ${kind.defaultBaseUrl}` : undefined)}>
        <input name="baseUrl" type="url" required value={baseUrl} onInput={(e) => setBaseUrl(e.currentTarget.value)} />
      </Field>
      <OptionsField kind={kind} value={options} onInput={setOptions} />
      <div class="field field-wide">
        <span class="field-label">Upstream keys</span>
        <div class="key-list" data-testid="provider-keys">
          {provider.keys.length === 0 && <span class="muted small">No keys. Use “Add key” on the provider's row.</span>}
          {provider.keys.map((k) => (
            <div class="key-row" key={k.id}>
              <Badge tone={k.enabled ? 'blue' : 'gray'}>{k.hint ? `••••${k.hint}` : `key #${k.id}`}</Badge>
              <span class="muted small grow">{k.label || 'no label'} · added {dateTime(k.createdAt)}</span>
              <Button size="sm" onClick={() => keyAction(`/providers/${provider.id}/keys/${k.id}/${k.enabled ? 'disable' : 'enable'}`,
                'post', k.enabled ? 'Key disabled' : 'Key enabled')}>{k.enabled ? 'Disable' : 'Enable'}</Button>
              <Button size="sm" variant="ghost" icon="trash" aria-label={`Remove key ${k.hint || k.id}`}
                onClick={() => keyAction(`/providers/${provider.id}/keys/${k.id}`, 'del', 'Upstream key removed')} />
            </div>
          ))}
        </div>
      </div>
    </FormModal>
  );
}

function KeyForm({ provider, onClose, onDone }: { provider: Provider; onClose: () => void; onDone: () => void }) {
  const [key, setKey] = useState('');
  const [label, setLabel] = useState('');
  return (
    <FormModal title={`Add key to ${provider.name}`} submitText="Add key" onClose={onClose} onSubmit={async () => {
      await api.post(`/providers/${provider.id}/keys`, { key, label: label.trim() });
      onDone();
    }}>
      <Field label="Upstream API key" wide hint="Several keys on one provider fail over to each other.">
        <input name="key" type="password" autoComplete="off" required value={key} onInput={(e) => setKey(e.currentTarget.value)} />
      </Field>
      <Field label="Label" wide>
        <input name="label" value={label} placeholder="optional, e.g. billing account" onInput={(e) => setLabel(e.currentTarget.value)} />
      </Field>
    </FormModal>
  );
}

// --- channels -------------------------------------------------------------------------------------

const BREAKER_TONE: Record<Breaker['state'], 'green' | 'red' | 'amber' | 'gray'> = {
  CLOSED: 'green', OPEN: 'red', HALF_OPEN: 'amber', UNKNOWN: 'gray',
};

function ChannelsCard({ data, onDialog, reload }: { data: Data; onDialog: (d: Dialog) => void; reload: () => void }) {
  const { run } = useAction();
  const [checks, setChecks] = useState<Record<number, HealthCheck | 'running' | { error: string }>>({});

  const check = async (c: Channel) => {
    setChecks((all) => ({ ...all, [c.id]: 'running' }));
    try {
      const result = await api.post<HealthCheck>(`/channels/${c.id}/health-check`);
      setChecks((all) => ({ ...all, [c.id]: result }));
    } catch (err) {
      setChecks((all) => ({ ...all, [c.id]: { error: errorText(asApiError(err)) } }));
    }
    reload();  // a check moves breakers
  };
  const recover = (c: Channel) =>
    run(() => api.post(`/channels/${c.id}/breaker/recover`), 'Breakers forced closed; calls flow again').then(reload);
  const reactivate = (m: Channel['models'][number]) =>
    run(() => api.post(`/models/${m.id}/reactivate`), `Model “${m.modelId}” is routed again`).then(reload);
  const toggle = (c: Channel) =>
    run(() => api.post(`/channels/${c.id}/${c.enabled ? 'disable' : 'enable'}`), c.enabled ? 'Channel disabled' : 'Channel enabled')
      .then(reload);

  return (
    <Card title="Channels" flush>
      <Table label="Channels" rows={data.channels} rowKey={(c) => c.id}
        empty={<Empty title="No channels yet" hint="A channel decides which models a provider serves, at what priority."
          action={data.providers.length > 0 &&
            <Button variant="primary" icon="plus" onClick={() => onDialog({ type: 'channel' })}>Add channel</Button>} />}
        columns={[
          {
            title: 'Channel',
            render: (c) => (
              <div class="stack">
                <strong>{c.name}</strong>
                <span class="muted small">#{c.id} · {c.providerName}</span>
              </div>
            ),
          },
          {
            title: 'Models',
            render: (c) => (
              <div class="chips">
                {c.models.map((m) => (
                  <span key={m.id} class="model-chip">
                    <Badge tone={m.state === 'ACTIVE' ? 'violet' : m.state === 'DEPRECATED' ? 'amber' : 'gray'}
                      title={`upstream ${m.upstreamModel} · ${m.state}`}>{m.modelId}{m.upstreamModel !== m.modelId ? ` → ${m.upstreamModel}` : ''}{m.state !== 'ACTIVE' ? ` · ${m.state.toLowerCase()}` : ''}</Badge>
                    {m.state !== 'ACTIVE' && (
                      <Button size="sm" variant="ghost" title="Route calls to this model again"
                        onClick={() => reactivate(m)}>Re-activate</Button>
                    )}
                  </span>
                ))}
                {c.models.length === 0 && <span class="muted">none</span>}
              </div>
            ),
          },
          {
            title: 'Routing',
            render: (c) => (
              <div class="stack nowrap small">
                <span>priority <strong>{c.priority}</strong></span>
                <span>weight <strong>{c.weight}</strong></span>
              </div>
            ),
          },
          { title: 'Status', render: (c) => <StatusDot on={c.enabled} /> },
          {
            title: 'Circuit breakers',
            render: (c) => {
              const tripped = c.breakers.some((b) => b.state === 'OPEN' || b.state === 'HALF_OPEN');
              return (
                <div class="stack gap">
                  {c.breakers.map((b) => (
                    <span key={b.endpointId} class="breaker" title={`endpoint ${b.endpointId}${b.openedAt ? `, opened ${dateTime(b.openedAt)}` : ''}`}>
                      <Badge tone={BREAKER_TONE[b.state]}>{b.state.replace('_', '-')}</Badge>
                      <span class="muted small">{b.keyHint ? `••••${b.keyHint}` : b.endpointId}
                        {b.failures ? ` · ${b.failures} failures` : ''}
                        {b.retryAfterSeconds ? ` · retry in ${Math.ceil(b.retryAfterSeconds)} s` : ''}</span>
                    </span>
                  ))}
                  {c.breakers.length === 0 && <span class="muted small">no usable key</span>}
                  {tripped && (
                    <Button size="sm" variant="danger" title="Close the breakers now instead of waiting for recovery"
                      onClick={() => recover(c)}>Force recovery</Button>
                  )}
                </div>
              );
            },
          },
          {
            title: 'Health',
            render: (c) => (
              <div class="stack gap">
                <HealthResult result={checks[c.id]} />
                <Button size="sm" icon="pulse" busy={checks[c.id] === 'running'} onClick={() => check(c)}>Check now</Button>
              </div>
            ),
          },
          {
            title: '',
            align: 'right',
            render: (c) => (
              <div class="row-actions stacked">
                <Button size="sm" onClick={() => toggle(c)}>{c.enabled ? 'Disable' : 'Enable'}</Button>
                <Button size="sm" variant="ghost" onClick={() => onDialog({ type: 'edit-channel', channel: c })}>Edit</Button>
                <Button size="sm" variant="ghost" icon="trash" aria-label={`Delete channel ${c.name}`}
                  onClick={() => onDialog({ type: 'delete-channel', channel: c })} />
              </div>
            ),
          },
        ]} />
    </Card>
  );
}

function HealthResult({ result }: { result: HealthCheck | 'running' | { error: string } | undefined }) {
  if (result === undefined) return <span class="muted small">not checked yet</span>;
  if (result === 'running') return <span class="muted small">checking…</span>;
  if ('error' in result) return <Badge tone="red" title={result.error}>check failed</Badge>;
  const detail = result.endpoints.map((e) => `${e.endpointId}: ${e.ok ? 'ok' : e.errorType} ${ms(e.latencyMs)}`).join('\n');
  return (
    <span class="stack health" title={detail} data-testid={`health-${result.channelId}`}>
      <Badge tone={result.ok ? 'green' : 'red'}>{result.ok ? 'Healthy' : result.errorType ?? 'Unhealthy'}</Badge>
      <span class="muted small">{ms(result.latencyMs)}{result.model ? ` · ${result.model}` : ''}</span>
      {!result.ok && result.message && <span class="small error-text">{result.message}</span>}
    </span>
  );
}

function ChannelForm({ providers, channel, onClose, onDone }: { providers: Provider[]; channel?: Channel;
  onClose: () => void; onDone: (c: Channel) => void }) {
  const [name, setName] = useState(channel?.name ?? '');
  const [providerId, setProviderId] = useState(channel?.providerId ?? providers[0]?.id ?? 0);
  const [models, setModels] = useState(channel?.models.map((m) => (m.upstreamModel === m.modelId
    ? m.modelId : `${m.modelId}=${m.upstreamModel}`)).join(', ') ?? '');
  const [priority, setPriority] = useState(String(channel?.priority ?? 0));
  const [weight, setWeight] = useState(String(channel?.weight ?? 1));
  // "alias=upstream" maps a gateway model id to the name the provider is sent.
  const modelList = () => models.split(/[\s,]+/).map((m) => m.trim()).filter(Boolean).map((m) => {
    const [modelId, upstream] = m.split('=', 2);
    return upstream ? { modelId: modelId.trim(), upstreamModel: upstream.trim() } : m;
  });

  return (
    <FormModal title={channel ? `Edit ${channel.name}` : 'Add channel'} submitText={channel ? 'Save' : 'Add channel'}
      onClose={onClose} onSubmit={async () => {
        const fields = { name: name.trim(), providerId, priority: Number(priority), weight: Number(weight) };
        if (channel) {
          await api.patch(`/channels/${channel.id}`, fields);
          onDone(await api.put<Channel>(`/channels/${channel.id}/models`, { models: modelList() }));
        } else {
          onDone(await api.post<Channel>('/channels', { ...fields, models: modelList() }));
        }
      }}>
      <Field label="Name">
        <input name="name" required value={name} onInput={(e) => setName(e.currentTarget.value)} />
      </Field>
      <Field label="Provider">
        <select name="providerId" value={providerId} onChange={(e) => setProviderId(Number(e.currentTarget.value))}>
          {providers.map((p) => <option key={p.id} value={p.id}>{p.name}</option>)}
        </select>
      </Field>
      <Field label="Models" wide hint={<>Model ids callers use, separated by commas or spaces. <code>fast=gpt-4o-mini</code> serves the upstream model <code>gpt-4o-mini</code> as <code>fast</code>.</>}>
        <input name="models" value={models} placeholder="gpt-4o-mini, fast=gpt-4o-mini" onInput={(e) => setModels(e.currentTarget.value)} />
      </Field>
      <Field label="Priority" hint="Lower is tried first; higher priorities are failover targets.">
        <input name="priority" type="number" required value={priority} onInput={(e) => setPriority(e.currentTarget.value)} />
      </Field>
      <Field label="Weight" hint="Share of calls among channels of the same priority.">
        <input name="weight" type="number" min={1} required value={weight} onInput={(e) => setWeight(e.currentTarget.value)} />
      </Field>
    </FormModal>
  );
}
