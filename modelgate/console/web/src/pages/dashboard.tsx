// Today's usage, a per-day trend and the top models, all from the call log.

import { useState } from 'preact/hooks';
import { api, type ModelUsage, type Stats, type TrendPoint } from '../api';
import { BarChart } from '../chart';
import { costText, num, pct, short } from '../format';
import { AutoRefreshButton, Badge, Button, Card, Empty, Loader, PageHeader, Table, useAutoRefresh, useLoad } from '../ui';

const RANGES = [7, 14, 30];

export function DashboardPage() {
  const [days, setDays] = useState(7);
  const [metric, setMetric] = useState<'requests' | 'tokens'>('requests');
  const stats = useLoad(() => api.get<Stats>('/stats'), []);
  const trend = useLoad(() => api.get<TrendPoint[]>('/stats/trend', { days }), [days]);
  const top = useLoad(() => api.get<ModelUsage[]>('/stats/model-usage', { limit: 8, days }), [days]);

  const refresh = () => {
    stats.reload();
    trend.reload();
    top.reload();
  };
  const auto = useAutoRefresh(refresh);

  return (
    <>
      <PageHeader title="Dashboard" subtitle="Usage measured from the call log. Days are UTC."
        actions={<><AutoRefreshButton auto={auto} /><Button icon="refresh" onClick={refresh}>Refresh</Button></>} />

      <Loader state={stats}>{(s) => <Kpis stats={s} />}</Loader>

      <div class="grid-2-1">
        <Card title={`Last ${days} days`} actions={
          <>
            <div class="segmented" role="group" aria-label="Metric">
              <button type="button" class={metric === 'requests' ? 'on' : ''} onClick={() => setMetric('requests')}>Requests</button>
              <button type="button" class={metric === 'tokens' ? 'on' : ''} onClick={() => setMetric('tokens')}>Tokens</button>
            </div>
            <select aria-label="Range" value={days} onChange={(e) => setDays(Number(e.currentTarget.value))}>
              {RANGES.map((d) => <option key={d} value={d}>{d} days</option>)}
            </select>
          </>
        }>
          <Loader state={trend}>{(points) => <Trend points={points} metric={metric} />}</Loader>
        </Card>
        <Card title="Top models" flush>
          <Loader state={top}>{(models) => <TopModels models={models} />}</Loader>
        </Card>
      </div>
    </>
  );
}

function Kpis({ stats }: { stats: Stats }) {
  const errorRate = stats.requestCount ? stats.errorCount / stats.requestCount : 0;
  return (
    <div class="kpis" data-testid="kpis">
      <div class="kpi">
        <span class="kpi-label">Requests today</span>
        <strong class="kpi-value" data-testid="kpi-requests">{num(stats.requestCount)}</strong>
        <span class="kpi-sub">{num(stats.successCount)} succeeded</span>
      </div>
      <div class="kpi">
        <span class="kpi-label">Tokens today</span>
        <strong class="kpi-value" data-testid="kpi-tokens">{num(stats.totalTokens)}</strong>
        <span class="kpi-sub">{short(stats.promptTokens)} in · {short(stats.completionTokens)} out</span>
      </div>
      <div class="kpi">
        <span class="kpi-label">Errors today</span>
        <strong class={stats.errorCount ? 'kpi-value bad' : 'kpi-value'} data-testid="kpi-errors">
          {num(stats.errorCount)}
        </strong>
        <span class="kpi-sub">{pct(errorRate)} of requests</span>
      </div>
      <div class="kpi">
        <span class="kpi-label">Estimated cost today</span>
        <strong class="kpi-value" data-testid="kpi-cost">{costText(stats.cost)}</strong>
        <span class="kpi-sub" title={stats.unpricedModels.join(', ')}>
          {stats.unpricedModels.length
            ? `${stats.unpricedModels.length} model(s) without a catalog price`
            : 'at catalog list prices'}
        </span>
      </div>
    </div>
  );
}

function Trend({ points, metric }: { points: TrendPoint[]; metric: 'requests' | 'tokens' }) {
  const labels = points.map((p) => p.date);
  const series = metric === 'requests'
    ? [
        { label: 'Succeeded', color: '#4f46e5', values: points.map((p) => p.successCount) },
        { label: 'Failed', color: '#e11d48', values: points.map((p) => p.errorCount) },
      ]
    : [
        { label: 'Prompt tokens', color: '#0ea5e9', values: points.map((p) => p.promptTokens) },
        { label: 'Completion tokens', color: '#8b5cf6', values: points.map((p) => p.completionTokens) },
      ];
  return <BarChart labels={labels} series={series} label={`${metric} per day`} />;
}

function TopModels({ models }: { models: ModelUsage[] }) {
  return (
    <Table label="Top models" rows={models} rowKey={(m) => m.model || '(none)'}
      empty={<Empty title="No calls yet" hint="Models appear here once applications call the gateway." />}
      columns={[
        {
          title: 'Model',
          render: (m) => (
            <div class="model-cell">
              {m.model ? <code>{m.model}</code> : <span class="muted">(no model named)</span>}
              <div class="share"><i style={{ width: pct(m.tokenShare) }} /></div>
              <span class="muted small">
                {pct(m.tokenShare)} of tokens · {m.priced ? costText(m.cost) : <Badge title="No catalog price for this model">unpriced</Badge>}
              </span>
            </div>
          ),
        },
        { title: 'Requests', align: 'right', render: (m) => num(m.requestCount) },
        { title: 'Tokens', align: 'right', render: (m) => short(m.totalTokens) },
      ]} />
  );
}
