// Addresses and networks refused before any other check (403 ACCESS_DENIED).

import { useState } from 'preact/hooks';
import { api, type BlacklistEntry } from '../api';
import { dateTime } from '../format';
import { Button, Card, Empty, Field, Loader, PageHeader, Table, ErrorBox, asApiError, toast, useAction, useLoad } from '../ui';
import type { ApiError } from '../api';

export function BlacklistPage() {
  const entries = useLoad(() => api.get<BlacklistEntry[]>('/ip-blacklist'), []);
  const [cidr, setCidr] = useState('');
  const [reason, setReason] = useState('');
  const [error, setError] = useState<ApiError | null>(null);
  const [busy, setBusy] = useState(false);
  const { run } = useAction();

  const add = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await api.post('/ip-blacklist', { cidr: cidr.trim(), reason: reason.trim() });
      toast(`${cidr.trim()} blocked`);
      setCidr('');
      setReason('');
      entries.reload();
    } catch (err) {
      setError(asApiError(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <>
      <PageHeader title="IP blacklist"
        subtitle="Calls from these addresses are refused with 403 before authentication. Changes apply within a second." />
      <Card title="Block an address">
        <form class="inline-form" onSubmit={add}>
          {error && <ErrorBox error={error} />}
          <Field label="Address or network">
            <input name="cidr" required placeholder="203.0.113.7 or 198.51.100.0/24" value={cidr}
              onInput={(e) => setCidr(e.currentTarget.value)} />
          </Field>
          <Field label="Reason">
            <input name="reason" placeholder="optional" value={reason} onInput={(e) => setReason(e.currentTarget.value)} />
          </Field>
          <Button type="submit" variant="primary" icon="plus" busy={busy}>Block</Button>
        </form>
      </Card>
      <Card title="Blocked" flush>
        <Loader state={entries}>{(list) => (
          <Table label="Blocked addresses" rows={list} rowKey={(e) => e.id}
            empty={<Empty title="Nothing blocked" hint="Every address may call the gateway with a valid key." />}
            columns={[
              { title: 'Address / network', render: (e) => <code>{e.cidr}</code> },
              { title: 'Reason', render: (e) => e.reason || <span class="muted">—</span> },
              { title: 'Added', render: (e) => dateTime(e.createdAt) },
              {
                title: '',
                align: 'right',
                render: (e) => (
                  <Button size="sm" variant="ghost" icon="trash"
                    onClick={() => run(() => api.del(`/ip-blacklist/${e.id}`), `${e.cidr} unblocked`).then(entries.reload)}>
                    Unblock
                  </Button>
                ),
              },
            ]} />
        )}</Loader>
      </Card>
    </>
  );
}
