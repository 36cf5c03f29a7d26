// Retry, failover, breaker and lifecycle events, newest first.

import { useState } from 'preact/hooks';
import { api, type Channel, type Page, type ResilienceEvent } from '../api';
import { dateTime } from '../format';
import { Badge, Button, Card, Empty, Loader, PageHeader, Pager, Table, useLoad } from '../ui';

const LIMIT = 25;
const TYPES: Record<string, { label: string; tone: 'red' | 'amber' | 'green' | 'blue' | 'gray' | 'violet' }> = {
  FAILOVER: { label: 'Failover', tone: 'blue' },
  RETRY_EXHAUSTED: { label: 'Retries exhausted', tone: 'amber' },
  BREAKER_OPENED: { label: 'Breaker opened', tone: 'red' },
  BREAKER_HALF_OPEN: { label: 'Breaker half-open', tone: 'amber' },
  BREAKER_CLOSED: { label: 'Breaker closed', tone: 'green' },
  BREAKER_FORCED: { label: 'Forced recovery', tone: 'violet' },
  MODEL_DEPRECATED: { label: 'Model deprecated', tone: 'gray' },
};

export function EventsPage() {
  const [type, setType] = useState('');
  const [channelId, setChannelId] = useState('');
  const [offset, setOffset] = useState(0);
  const channels = useLoad(() => api.get<Channel[]>('/channels'), []);
  const page = useLoad(() => api.get<Page<ResilienceEvent>>('/resilience/events', { type, channelId, limit: LIMIT, offset }),
    [type, channelId, offset]);
  const names = new Map((channels.data ?? []).map((c) => [c.id, c.name]));

  return (
    <>
      <PageHeader title="Resilience events"
        subtitle="What the gateway did to keep calls flowing: retries, failovers, circuit breakers, model deprecation."
        actions={<Button icon="refresh" onClick={page.reload}>Refresh</Button>} />
      <Card flush>
        <div class="filter-bar">
          <select aria-label="Event type" value={type} onChange={(e) => { setType(e.currentTarget.value); setOffset(0); }}>
            <option value="">All event types</option>
            {Object.entries(TYPES).map(([value, t]) => <option key={value} value={value}>{t.label}</option>)}
          </select>
          <select aria-label="Channel" value={channelId} onChange={(e) => { setChannelId(e.currentTarget.value); setOffset(0); }}>
            <option value="">All channels</option>
            {(channels.data ?? []).map((c) => <option key={c.id} value={c.id}>{c.name}</option>)}
          </select>
        </div>
        <Loader state={page}>{(p) => (
          <>
            <Table label="Events" rows={p.items} rowKey={(e) => e.id}
              empty={<Empty title="No events" hint="A quiet log means upstreams have been healthy." />}
              columns={[
                { title: 'Time', render: (e) => <span class="nowrap">{dateTime(e.createdAt)}</span> },
                {
                  title: 'Event',
                  render: (e) => <Badge tone={TYPES[e.type]?.tone ?? 'gray'}>{TYPES[e.type]?.label ?? e.type}</Badge>,
                },
                { title: 'Channel', render: (e) => (e.channelId ? names.get(e.channelId) ?? `#${e.channelId}` : '—') },
                { title: 'Endpoint', render: (e) => (e.endpointId ? <code class="small">{e.endpointId}</code> : '—') },
                { title: 'Model', render: (e) => (e.model ? <code>{e.model}</code> : '—') },
                { title: 'Error', render: (e) => <span class="nowrap">{e.errorType ?? '—'}</span> },
                { title: 'Detail', render: (e) => <span class="small detail">{e.detail}</span> },
                { title: 'Trace id', render: (e) => (e.traceId ? <code class="small trace" title={e.traceId}>{e.traceId}</code> : '—') },
              ]} />
            <Pager total={p.total} limit={LIMIT} offset={offset} onChange={setOffset} />
          </>
        )}</Loader>
      </Card>
    </>
  );
}
