// The plan catalog: providers, their plans and per-model list prices and capabilities.

import { useEffect, useState } from 'preact/hooks';
import { api, type Capability, type CatalogModel, type CatalogProvider, type Plan, type Pricing } from '../api';
import { num, price } from '../format';
import { Badge, Card, Empty, Loader, Modal, PageHeader, Pager, Table, useLoad } from '../ui';

const PAGE = 25;

const CAPABILITIES: { value: Capability; label: string }[] = [
  { value: 'streaming', label: 'Streaming' },
  { value: 'functionCalling', label: 'Function calling' },
  { value: 'vision', label: 'Vision' },
];
const CAP_LABEL = new Map(CAPABILITIES.map((c) => [c.value, c.label]));

type Tab = 'models' | 'plans' | 'providers';

export function CatalogPage() {
  const [tab, setTab] = useState<Tab>('models');
  return (
    <>
      <PageHeader title="Plan catalog"
        subtitle="Public plans and list prices of the built-in provider kinds, per million tokens. Costs on the dashboard use these prices." />
      <div class="tabs" role="tablist">
        {(['models', 'plans', 'providers'] as Tab[]).map((t) => (
          <button key={t} type="button" role="tab" aria-selected={tab === t} class={tab === t ? 'tab on' : 'tab'}
            onClick={() => setTab(t)}>{t[0].toUpperCase() + t.slice(1)}</button>
        ))}
      </div>
      {tab === 'models' && <Models />}
      {tab === 'plans' && <Plans />}
      {tab === 'providers' && <Providers />}
    </>
  );
}

function useDebounced<T>(value: T, delay = 250): T {
  const [out, setOut] = useState(value);
  useEffect(() => {
    const timer = setTimeout(() => setOut(value), delay);
    return () => clearTimeout(timer);
  }, [value, delay]);
  return out;
}

function Models() {
  const [keyword, setKeyword] = useState('');
  const [capability, setCapability] = useState('');
  const [provider, setProvider] = useState('');
  const [offset, setOffset] = useState(0);
  const query = useDebounced(keyword.trim());
  useEffect(() => setOffset(0), [query, capability, provider]);
  const models = useLoad(() => api.get<CatalogModel[]>('/plan-catalogs/models', { keyword: query, capability }),
    [query, capability]);
  const providers = [...new Set((models.data ?? []).map((m) => m.providerName))].sort();
  const rows = (models.data ?? []).filter((m) => !provider || m.providerName === provider);

  return (
    <Card flush title={models.data ? `${num(rows.length)} models` : 'Models'} actions={
      <div class="filters">
        <input type="search" aria-label="Keyword" placeholder="Search models…" value={keyword}
          onInput={(e) => setKeyword(e.currentTarget.value)} />
        <select aria-label="Capability" value={capability} onChange={(e) => setCapability(e.currentTarget.value)}>
          <option value="">Any capability</option>
          {CAPABILITIES.map((c) => <option key={c.value} value={c.value}>{c.label}</option>)}
        </select>
        <select aria-label="Provider" value={provider} onChange={(e) => setProvider(e.currentTarget.value)}>
          <option value="">All providers</option>
          {providers.map((p) => <option key={p} value={p}>{p}</option>)}
        </select>
      </div>
    }>
      <Loader state={models}>{() => (
        <>
        <Table label="Catalog models" rows={rows.slice(offset, offset + PAGE)} rowKey={(m) => `${m.planCode}/${m.id}`}
          empty={<Empty title="No model matches" hint="Try another keyword or capability." />}
          columns={[
            {
              title: 'Model',
              render: (m) => (
                <div class="stack">
                  <code>{m.id}</code>
                  {m.name !== m.id && <span class="muted small">{m.name}</span>}
                </div>
              ),
            },
            { title: 'Provider', render: (m) => m.providerName },
            { title: 'Input / 1M', align: 'right', render: (m) => price(m.inputPrice, m.currency) },
            { title: 'Output / 1M', align: 'right', render: (m) => price(m.outputPrice, m.currency) },
            { title: 'Context', align: 'right', render: (m) => (m.contextWindow ? `${num(m.contextWindow)}` : '—') },
            {
              title: 'Capabilities',
              render: (m) => (
                <div class="chips nowrap">
                  {m.capabilities.map((c) => <Badge key={c} tone="violet">{CAP_LABEL.get(c) ?? c}</Badge>)}
                </div>
              ),
            },
          ]} />
        {rows.length > PAGE && <Pager total={rows.length} limit={PAGE} offset={offset} onChange={setOffset} />}
        </>
      )}</Loader>
    </Card>
  );
}

function Plans() {
  const plans = useLoad(() => api.get<Plan[]>('/plan-catalogs'), []);
  const [open, setOpen] = useState<Plan | null>(null);
  return (
    <Card flush title="Plans">
      <Loader state={plans}>{(list) => (
        <Table label="Plans" rows={list} rowKey={(p) => p.planCode}
          columns={[
            {
              title: 'Plan',
              render: (p) => (
                <button type="button" class="link-btn" onClick={() => setOpen(p)}>
                  <strong>{p.name}</strong>
                  <span class="muted small">{p.planCode}</span>
                </button>
              ),
            },
            { title: 'Provider', render: (p) => p.providerName },
            { title: 'Type', render: (p) => <Badge tone={p.type === 'FREE' ? 'green' : 'gray'}>{p.type.replaceAll('_', ' ').toLowerCase()}</Badge> },
            { title: 'Models', align: 'right', render: (p) => p.modelCount },
            { title: 'Currency', render: (p) => p.currency },
            { title: 'Prices checked', render: (p) => p.pricesCheckedAt },
            { title: '', render: (p) => (p.default ? <Badge tone="blue">default</Badge> : null) },
          ]} />
      )}</Loader>
      {open && <PricingDialog plan={open} onClose={() => setOpen(null)} />}
    </Card>
  );
}

function PricingDialog({ plan, onClose }: { plan: Plan; onClose: () => void }) {
  const pricing = useLoad(() => api.get<Pricing>(`/plan-catalogs/${encodeURIComponent(plan.planCode)}/pricing`), [plan.planCode]);
  return (
    <Modal title={`${plan.name} — pricing`} onClose={onClose} wide>
      {plan.description && <p class="muted">{plan.description}</p>}
      <Loader state={pricing}>{(p) => (
        <>
          <p class="small muted">Prices {p.unit.replaceAll('_', ' ').toLowerCase()} in {p.currency}, checked {p.pricesCheckedAt}.</p>
          <Table label="Prices" rows={p.prices} rowKey={(r) => r.model}
            columns={[
              { title: 'Model', render: (r) => <code>{r.model}</code> },
              { title: 'Input', align: 'right', render: (r) => price(r.inputPrice, p.currency) },
              { title: 'Output', align: 'right', render: (r) => price(r.outputPrice, p.currency) },
            ]} />
        </>
      )}</Loader>
    </Modal>
  );
}

function Providers() {
  const providers = useLoad(() => api.get<CatalogProvider[]>('/plan-catalogs/providers'), []);
  return (
    <Card flush title="Provider kinds">
      <Loader state={providers}>{(list) => (
        <Table label="Catalog providers" rows={list} rowKey={(p) => p.kind}
          columns={[
            { title: 'Provider', render: (p) => <div class="stack"><strong>{p.name}</strong><code class="small">{p.kind}</code></div> },
            { title: 'Default base URL', render: (p) => (p.defaultBaseUrl ? <code class="truncate">{p.defaultBaseUrl}</code> : <span class="muted">set per provider</span>) },
            { title: 'Plans', render: (p) => <div class="chips">{p.planCodes.map((c) => <Badge key={c}>{c}</Badge>)}</div> },
            { title: 'Models', align: 'right', render: (p) => p.modelCount },
            { title: 'Key', render: (p) => (p.keyRequired ? 'required' : <span class="muted">optional</span>) },
            {
              title: 'Pricing',
              render: (p) => (p.pricingUrl ? <a href={p.pricingUrl} target="_blank" rel="noreferrer">public prices</a> : '—'),
            },
          ]} />
      )}</Loader>
    </Card>
  );
}
