// Number, date and money formatting shared by every page.

const integer = new Intl.NumberFormat('en-US');
const compact = new Intl.NumberFormat('en-US', { notation: 'compact', maximumFractionDigits: 1 });

export function num(n: number): string {
  return integer.format(n);
}

export function short(n: number): string {
  return n < 10_000 ? integer.format(n) : compact.format(n);
}

export function money(amount: number, currency: string): string {
  // Sub-cent amounts are normal for a few calls: show enough digits to be non-zero.
  const digits = amount !== 0 && Math.abs(amount) < 0.01 ? 6 : 2;
  try {
    return new Intl.NumberFormat('en-US', {
      style: 'currency',
      currency,
      minimumFractionDigits: 2,
      maximumFractionDigits: digits,
    }).format(amount);
  } catch {
    return `${amount.toFixed(digits)} ${currency}`;
  }
}

export function costText(cost: Record<string, number>): string {
  const entries = Object.entries(cost);
  if (entries.length === 0) return money(0, 'USD');
  return entries.map(([c, v]) => money(v, c)).join(' + ');
}

export function price(perMillion: number, currency: string): string {
  return perMillion === 0 ? 'free' : money(perMillion, currency);
}

export function dateTime(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  const thisYear = d.getFullYear() === new Date().getFullYear();
  return d.toLocaleString('en-GB', {
    year: thisYear ? undefined : 'numeric', month: 'short', day: '2-digit',
    hour: '2-digit', minute: '2-digit', second: '2-digit',
  });
}

export function relative(iso: string | null | undefined): string {
  if (!iso) return 'never';
  const seconds = Math.round((Date.now() - new Date(iso).getTime()) / 1000);
  if (seconds < 60) return 'just now';
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)} h ago`;
  return `${Math.floor(seconds / 86400)} d ago`;
}

export function ms(value: number | null | undefined): string {
  if (value === null || value === undefined) return '—';
  return value < 1000 ? `${Math.round(value)} ms` : `${(value / 1000).toFixed(2)} s`;
}

export function pct(share: number): string {
  return `${(share * 100).toFixed(share < 0.1 ? 1 : 0)}%`;
}
