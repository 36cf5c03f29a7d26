// A stacked bar chart in inline SVG, sized to its container.

import { useEffect, useRef, useState } from 'preact/hooks';
import { short } from './format';

export interface Series {
  label: string;
  color: string;
  values: number[];
}

const HEIGHT = 240;
const PAD = { top: 16, right: 12, bottom: 28, left: 48 };

const TICKS = 4;

// The distance between axis ticks: a whole 1, 2 or 5 times a power of ten (the values are counts),
// so that TICKS of them reach the largest bar.
export function tickStep(max: number): number {
  const raw = max / TICKS;
  if (raw <= 1) return 1;
  const power = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) {
    if (m * power >= raw) return m * power;
  }
  return 10 * power;
}

export function BarChart({ labels, series, label }: { labels: string[]; series: Series[]; label: string }) {
  const ref = useRef<HTMLDivElement>(null);
  const [width, setWidth] = useState(640);
  const [hover, setHover] = useState<number | null>(null);

  useEffect(() => {
    const el = ref.current;
    if (!el) return;
    const observer = new ResizeObserver(([entry]) => setWidth(Math.max(280, entry.contentRect.width)));
    observer.observe(el);
    return () => observer.disconnect();
  }, []);

  const totals = labels.map((_, i) => series.reduce((sum, s) => sum + (s.values[i] ?? 0), 0));
  const step = tickStep(Math.max(...totals, 0));
  const max = step * TICKS;
  const plotW = width - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  const slot = plotW / Math.max(labels.length, 1);
  const barW = Math.max(4, Math.min(36, slot * 0.6));
  const ticks = Array.from({ length: TICKS + 1 }, (_, i) => i * step);
  const y = (v: number) => PAD.top + plotH - (v / max) * plotH;
  // Label every day on wide charts, fewer when space is short.
  const every = Math.ceil(labels.length / Math.max(1, Math.floor(plotW / 56)));

  return (
    <div class="chart" ref={ref}>
      <svg width={width} height={HEIGHT} role="img" aria-label={label}>
        {ticks.map((t) => (
          <g key={t}>
            <line x1={PAD.left} x2={width - PAD.right} y1={y(t)} y2={y(t)} class="chart-grid" />
            <text x={PAD.left - 8} y={y(t) + 4} text-anchor="end" class="chart-axis">{short(t)}</text>
          </g>
        ))}
        {labels.map((day, i) => {
          const x = PAD.left + slot * i + (slot - barW) / 2;
          let base = 0;
          return (
            <g key={day} onMouseEnter={() => setHover(i)} onMouseLeave={() => setHover(null)}>
              <rect x={PAD.left + slot * i} y={PAD.top} width={slot} height={plotH}
                class={hover === i ? 'chart-hover on' : 'chart-hover'} />
              {series.map((s) => {
                const v = s.values[i] ?? 0;
                const top = y(base + v);
                const h = y(base) - top;
                base += v;
                return h > 0 ? <rect key={s.label} x={x} y={top} width={barW} height={h} rx={2} fill={s.color} /> : null;
              })}
              {i % every === 0 && (
                <text x={PAD.left + slot * i + slot / 2} y={HEIGHT - 8} text-anchor="middle" class="chart-axis">
                  {day.slice(5)}
                </text>
              )}
            </g>
          );
        })}
      </svg>
      {hover !== null && (
        <div class="chart-tip" style={{ left: `${Math.min(width - 170, PAD.left + slot * hover + slot / 2 + 8)}px` }}>
          <strong>{labels[hover]}</strong>
          {series.map((s) => (
            <div key={s.label}><i style={{ background: s.color }} />{s.label}: {short(s.values[hover] ?? 0)}</div>
          ))}
        </div>
      )}
      <div class="legend">
        {series.map((s) => <span key={s.label}><i style={{ background: s.color }} />{s.label}</span>)}
      </div>
    </div>
  );
}
