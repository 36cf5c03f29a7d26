// The audit log: admin actions and logins, who, what, when and from where.

import { useState } from 'preact/hooks';
import { api, type AuditEntry, type Page } from '../api';
import { dateTime } from '../format';
import { Badge, Button, Card, Empty, Loader, PageHeader, Pager, Table, useLoad } from '../ui';
import { statusTone } from './calls';

const LIMIT = 50;

export function AuditPage() {
  const [actor, setActor] = useState('');
  const [action, setAction] = useState('');
  const [filters, setFilters] = useState({ actor: '', action: '' });
  const [offset, setOffset] = useState(0);
  const page = useLoad(() => api.get<Page<AuditEntry>>('/audit-log', { ...filters, limit: LIMIT, offset }),
    [filters, offset]);
  return (
    <>
      <PageHeader title="Audit log" subtitle="Every change made through the API, the console or the CLI, and every login."
        actions={<Button icon="refresh" onClick={page.reload}>Refresh</Button>} />
      <Card flush>
        <form class="filter-bar" onSubmit={(e) => {
          e.preventDefault();
          setOffset(0);
          setFilters({ actor: actor.trim(), action: action.trim() });
        }}>
          <input aria-label="Actor" placeholder="Actor (username)" value={actor} onInput={(e) => setActor(e.currentTarget.value)} />
          <input aria-label="Action" class="grow" placeholder="Action contains, e.g. providers or login" value={action}
            onInput={(e) => setAction(e.currentTarget.value)} />
          <Button type="submit" variant="primary" icon="search">Filter</Button>
        </form>
        <Loader state={page}>{(p) => (
          <>
            <Table label="Audit log" rows={p.items} rowKey={(e) => e.id}
              empty={<Empty title="Nothing recorded yet" />}
              columns={[
                { title: 'Time', render: (e) => <span class="nowrap">{dateTime(e.createdAt)}</span> },
                {
                  title: 'Who',
                  render: (e) => (
                    <div class="stack">
                      <strong>{e.actor}</strong>
                      <span class="muted small nowrap">{e.via.startsWith('token:') ? `API token #${e.via.slice(6)}` : e.via}</span>
                    </div>
                  ),
                },
                {
                  title: 'What',
                  render: (e) => (
                    <div class="stack">
                      <code class="small">{e.action}</code>
                      {e.target && e.target !== e.action.split(' ')[1] && <span class="muted small break">{e.target}</span>}
                    </div>
                  ),
                },
                { title: 'Result', render: (e) => (e.status ? <Badge tone={statusTone(e.status)}>{e.status}</Badge> : '—') },
                { title: 'From', render: (e) => (e.clientIp ? <code class="small">{e.clientIp}</code> : '—') },
                { title: 'Trace id', render: (e) => (e.traceId ? <code class="small trace" title={e.traceId}>{e.traceId}</code> : '—') },
              ]} />
            <Pager total={p.total} limit={LIMIT} offset={offset} onChange={setOffset} />
          </>
        )}</Loader>
      </Card>
    </>
  );
}
