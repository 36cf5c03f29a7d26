// The call log: one row per inference call, filterable and paged.

import { useState } from 'preact/hooks';
import { api, type ApiKey, type CallLog, type Page } from '../api';
import { dateTime, ms, num } from '../format';
import {
  AutoRefreshButton, Badge, Button, Card, CopyButton, Empty, Loader, PageHeader, Pager, Table, useAutoRefresh, useLoad,
} from '../ui';

const LIMIT = 25;
const STATUSES = [200, 400, 401, 403, 404, 429, 500, 502, 503];

interface Filters {
  keyId: string;
  model: string;
  status: string;
  traceId: string;
}

const EMPTY: Filters = { keyId: '', model: '', status: '', traceId: '' };

export function statusTone(status: number): 'green' | 'amber' | 'red' {
  return status < 400 ? 'green' : status < 500 ? 'amber' : 'red';
}

export function CallLogPage() {
  const [draft, setDraft] = useState<Filters>(EMPTY);
  const [filters, setFilters] = useState<Filters>(EMPTY);
  const [offset, setOffset] = useState(0);
  const keys = useLoad(() => api.get<ApiKey[]>('/keys', { includeDeleted: true }), []);
  const page = useLoad(() => api.get<Page<CallLog>>('/call-logs', {
    keyId: filters.keyId, model: filters.model.trim(), status: filters.status, traceId: filters.traceId.trim(),
    limit: LIMIT, offset,
  }), [filters, offset]);
  const auto = useAutoRefresh(page.reload);
  const prefixes = new Map((keys.data ?? []).map((k) => [k.id, k.prefix]));
  const set = (field: keyof Filters) => (e: Event) =>
    setDraft({ ...draft, [field]: (e.currentTarget as HTMLInputElement).value });
  const apply = (e: Event) => {
    e.preventDefault();
    setOffset(0);
    setFilters({ ...draft });
  };

  return (
    <>
      <PageHeader title="Call log" subtitle="Every inference call with its status, tokens, latency and trace id."
        actions={<><AutoRefreshButton auto={auto} /><Button icon="refresh" onClick={page.reload}>Refresh</Button></>} />
      <Card flush>
        <form class="filter-bar" onSubmit={apply}>
          <select aria-label="Key" value={draft.keyId} onChange={set('keyId')}>
            <option value="">All keys</option>
            {(keys.data ?? []).map((k) => <option key={k.id} value={k.id}>{k.prefix} {k.name}</option>)}
          </select>
          <input aria-label="Model" placeholder="Model" value={draft.model} onInput={set('model')} />
          <select aria-label="Status" value={draft.status} onChange={set('status')}>
            <option value="">Any status</option>
            {STATUSES.map((s) => <option key={s} value={s}>{s}</option>)}
          </select>
          <input aria-label="Trace id" class="grow" placeholder="Trace id" value={draft.traceId} onInput={set('traceId')} />
          <Button type="submit" variant="primary" icon="search">Filter</Button>
          <Button variant="ghost" onClick={() => {
            setDraft(EMPTY);
            setFilters(EMPTY);
            setOffset(0);
          }}>Clear</Button>
        </form>
        <Loader state={page}>{(p) => (
          <>
            <Table label="Calls" rows={p.items} rowKey={(c) => c.id}
              empty={<Empty title="No calls found" hint="Calls made with a gateway key show up here within a second." />}
              columns={[
                { title: 'Time', render: (c) => <span class="nowrap">{dateTime(c.createdAt)}</span> },
                {
                  title: 'Status',
                  render: (c) => <Badge tone={statusTone(c.status)} title={c.errorCode ?? undefined}>{c.status}{c.errorCode ? ` ${c.errorCode}` : ''}</Badge>,
                },
                {
                  title: 'Model',
                  render: (c) => (
                    <div class="stack">
                      {c.model ? <code>{c.model}</code> : <span class="muted">—</span>}
                      <span class="muted small">{c.protocol}{c.stream ? ' · stream' : ''}{c.providerKind ? ` · ${c.providerKind}` : ''}</span>
                    </div>
                  ),
                },
                { title: 'Key', render: (c) => (c.keyId ? <code>{prefixes.get(c.keyId) ?? `#${c.keyId}`}</code> : '—') },
                { title: 'Channel', align: 'right', render: (c) => (c.channelId ? `#${c.channelId}` : '—') },
                {
                  title: 'Tokens',
                  align: 'right',
                  render: (c) => <span title={`${c.promptTokens} in · ${c.completionTokens} out`}>{num(c.totalTokens)}</span>,
                },
                {
                  title: 'Latency',
                  align: 'right',
                  render: (c) => <span title={c.firstByteMs !== null ? `first byte ${ms(c.firstByteMs)}` : undefined}>{ms(c.latencyMs)}</span>,
                },
                { title: 'Tries', align: 'right', render: (c) => c.attempts },
                {
                  title: 'Trace id',
                  render: (c) => (
                    <span class="trace-cell">
                      <code class="small trace" title={c.traceId}>{c.traceId}</code>
                      <CopyButton text={c.traceId} label="" />
                    </span>
                  ),
                },
              ]} />
            <Pager total={p.total} limit={LIMIT} offset={offset} onChange={setOffset} />
          </>
        )}</Loader>
      </Card>
    </>
  );
}
