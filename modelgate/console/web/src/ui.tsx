// Building blocks every page uses: layout pieces, tables, forms, dialogs, toasts, data loading.

import { cloneElement, type ButtonHTMLAttributes, type ComponentChildren, type VNode } from 'preact';
import { useCallback, useEffect, useId, useRef, useState } from 'preact/hooks';
import { ApiError } from './api';

// --- data loading -----------------------------------------------------------------------------

export interface Loaded<T> {
  data: T | undefined;
  error: ApiError | null;
  loading: boolean;
  reload: () => void;
}

export function useLoad<T>(load: () => Promise<T>, deps: unknown[]): Loaded<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<ApiError | null>(null);
  const [loading, setLoading] = useState(true);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    setLoading(true);
    load().then(
      (value) => {
        if (!live) return;
        setData(value);
        setError(null);
        setLoading(false);
      },
      (err) => {
        if (!live) return;
        setError(asApiError(err));
        setLoading(false);
      },
    );
    return () => {
      live = false;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [...deps, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { data, error, loading, reload };
}

export function asApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  return new ApiError(0, 'CLIENT_ERROR', err instanceof Error ? err.message : String(err));
}

// --- toasts -------------------------------------------------------------------------------------

interface Toast {
  id: number;
  kind: 'ok' | 'error';
  text: string;
}

let toasts: Toast[] = [];
let nextToast = 1;
const listeners = new Set<(t: Toast[]) => void>();

function publish(next: Toast[]): void {
  toasts = next;
  listeners.forEach((l) => l(toasts));
}

export function toast(text: string, kind: Toast['kind'] = 'ok'): void {
  const id = nextToast++;
  publish([...toasts, { id, kind, text }].slice(-3));  // the latest few; older ones are stale
  setTimeout(() => publish(toasts.filter((t) => t.id !== id)), kind === 'error' ? 7000 : 3500);
}

export function toastError(err: unknown): void {
  toast(errorText(asApiError(err)), 'error');
}

export function errorText(err: ApiError): string {
  return err.code && err.code !== 'BAD_REQUEST' ? `${err.message} (${err.code})` : err.message;
}

export function Toasts() {
  const [items, setItems] = useState(toasts);
  useEffect(() => {
    listeners.add(setItems);
    return () => {
      listeners.delete(setItems);
    };
  }, []);
  return (
    <div class="toasts" role="status" aria-live="polite">
      {items.map((t) => (
        <div key={t.id} class={`toast toast-${t.kind}`}>
          <Icon name={t.kind === 'ok' ? 'check' : 'alert'} />
          <span>{t.text}</span>
        </div>
      ))}
    </div>
  );
}

// --- icons (stroke paths, 24x24) ----------------------------------------------------------------

const ICONS: Record<string, string> = {
  dashboard: 'M3 13h8V3H3zM13 21h8V11h-8zM3 21h8v-6H3zM13 3v6h8V3z',
  server: 'M4 4h16v6H4zM4 14h16v6H4zM8 7h.01M8 17h.01',
  key: 'M15 7a4 4 0 1 1-3.9 4.9L3 20v-3h3v-3h3l2.1-2.1A4 4 0 0 1 15 7zM16 10h.01',
  book: 'M4 4.5A2.5 2.5 0 0 1 6.5 2H20v18H6.5A2.5 2.5 0 0 0 4 22.5zM4 19.5A2.5 2.5 0 0 1 6.5 17H20',
  activity: 'M22 12h-4l-3 9L9 3l-3 9H2',
  list: 'M8 6h13M8 12h13M8 18h13M3 6h.01M3 12h.01M3 18h.01',
  users: 'M17 21v-2a4 4 0 0 0-4-4H5a4 4 0 0 0-4 4v2M9 11a4 4 0 1 0 0-8 4 4 0 0 0 0 8zM23 21v-2a4 4 0 0 0-3-3.9M16 3.1a4 4 0 0 1 0 7.8',
  shield: 'M12 22s8-4 8-10V5l-8-3-8 3v7c0 6 8 10 8 10zM9 9l6 6M15 9l-6 6',
  logout: 'M9 21H5a2 2 0 0 1-2-2V5a2 2 0 0 1 2-2h4M16 17l5-5-5-5M21 12H9',
  plus: 'M12 5v14M5 12h14',
  check: 'M20 6 9 17l-5-5',
  alert: 'M12 9v4M12 17h.01M10.3 3.9 1.8 18a2 2 0 0 0 1.7 3h17a2 2 0 0 0 1.7-3L13.7 3.9a2 2 0 0 0-3.4 0z',
  copy: 'M9 9h11v11H9zM5 15H4V4h11v1',
  refresh: 'M23 4v6h-6M1 20v-6h6M3.5 9a9 9 0 0 1 14.9-3.4L23 10M1 14l4.6 4.4A9 9 0 0 0 20.5 15',
  pause: 'M6 4h4v16H6zM14 4h4v16h-4z',
  lock: 'M5 11h14v10H5zM8 11V7a4 4 0 0 1 8 0v4',
  file: 'M14 2H6v20h12V6zM14 2v4h4M8 13h8M8 17h8',
  play: 'M5 3l14 9-14 9V3z',
  pulse: 'M3 12h4l2-5 4 10 2-5h6',
  x: 'M18 6 6 18M6 6l12 12',
  menu: 'M3 6h18M3 12h18M3 18h18',
  search: 'M11 19a8 8 0 1 0 0-16 8 8 0 0 0 0 16zM21 21l-4.3-4.3',
  trash: 'M3 6h18M8 6V4h8v2M19 6l-1 14H6L5 6',
};

export function Icon({ name, size = 18 }: { name: keyof typeof ICONS | string; size?: number }) {
  return (
    <svg class="icon" width={size} height={size} viewBox="0 0 24 24" fill="none" stroke="currentColor"
      stroke-width="2" stroke-linecap="round" stroke-linejoin="round" aria-hidden="true">
      <path d={ICONS[name] ?? ''} />
    </svg>
  );
}

// --- layout -----------------------------------------------------------------------------------

export function PageHeader(props: { title: string; subtitle?: string; actions?: ComponentChildren }) {
  return (
    <header class="page-header">
      <div>
        <h1>{props.title}</h1>
        {props.subtitle && <p class="muted">{props.subtitle}</p>}
      </div>
      {props.actions && <div class="page-actions">{props.actions}</div>}
    </header>
  );
}

export function Card(props: { title?: ComponentChildren; actions?: ComponentChildren; children: ComponentChildren;
  class?: string; flush?: boolean }) {
  return (
    <section class={`card ${props.class ?? ''}`}>
      {(props.title || props.actions) && (
        <div class="card-head">
          {props.title && <h2>{props.title}</h2>}
          {props.actions && <div class="card-actions">{props.actions}</div>}
        </div>
      )}
      <div class={props.flush ? 'card-body flush' : 'card-body'}>{props.children}</div>
    </section>
  );
}

export function Badge(props: { tone?: 'green' | 'red' | 'amber' | 'gray' | 'blue' | 'violet'; children: ComponentChildren;
  title?: string }) {
  return <span class={`badge badge-${props.tone ?? 'gray'}`} title={props.title}>{props.children}</span>;
}

export function StatusDot(props: { on: boolean; onText?: string; offText?: string }) {
  return (
    <span class={`status ${props.on ? 'status-on' : 'status-off'}`}>
      <i />
      {props.on ? props.onText ?? 'Enabled' : props.offText ?? 'Disabled'}
    </span>
  );
}

export function ErrorBox({ error, retry }: { error: ApiError; retry?: () => void }) {
  return (
    <div class="error-box" role="alert">
      <Icon name="alert" />
      <div>
        <strong>{error.message}</strong>
        <div class="muted small">
          {error.code}
          {error.status ? ` · HTTP ${error.status}` : ''}
          {error.traceId ? ` · trace ${error.traceId}` : ''}
        </div>
      </div>
      {retry && <Button variant="ghost" onClick={retry}>Retry</Button>}
    </div>
  );
}

export function Empty(props: { title: string; hint?: ComponentChildren; action?: ComponentChildren }) {
  return (
    <div class="empty">
      <strong>{props.title}</strong>
      {props.hint && <p class="muted">{props.hint}</p>}
      {props.action}
    </div>
  );
}

export function Loading() {
  return <div class="loading" aria-busy="true"><span class="spinner" /> Loading…</div>;
}

// Renders a loaded value, its error or a spinner.
export function Loader<T>(props: { state: Loaded<T>; children: (data: T) => ComponentChildren }) {
  const { data, error, loading, reload } = props.state;
  if (error) return <ErrorBox error={error} retry={reload} />;
  if (data === undefined) return loading ? <Loading /> : null;
  return <>{props.children(data)}</>;
}

// Reloads a page's data every few seconds while the tab is visible, until paused.
export function useAutoRefresh(refresh: () => void, seconds = 10): { on: boolean; toggle: () => void } {
  const [on, setOn] = useState(true);
  const latest = useRef(refresh);
  latest.current = refresh;
  useEffect(() => {
    if (!on) return undefined;
    const timer = setInterval(() => {
      if (!document.hidden) latest.current();
    }, seconds * 1000);
    return () => clearInterval(timer);
  }, [on, seconds]);
  return { on, toggle: () => setOn((v) => !v) };
}

export function AutoRefreshButton({ auto, seconds = 10 }: { auto: { on: boolean; toggle: () => void };
  seconds?: number }) {
  return (
    <Button icon={auto.on ? 'pause' : 'play'} onClick={auto.toggle} aria-pressed={!auto.on}
      title={auto.on ? `Refreshing every ${seconds} s; click to pause` : 'Auto-refresh is paused; click to resume'}>
      {auto.on ? 'Pause' : 'Resume'} auto-refresh
    </Button>
  );
}

// --- buttons and forms ----------------------------------------------------------------------

type ButtonProps = Omit<ButtonHTMLAttributes<HTMLButtonElement>, 'icon' | 'size' | 'type'> & {
  variant?: 'primary' | 'secondary' | 'ghost' | 'danger';
  size?: 'sm' | 'md';
  icon?: string;
  busy?: boolean;
  type?: 'button' | 'submit';
  disabled?: boolean;
};

export function Button({ variant = 'secondary', size = 'md', icon, busy, children, type = 'button', disabled,
  class: extra, ...rest }: ButtonProps) {
  return (
    <button {...rest} type={type} disabled={disabled || busy}
      class={`btn btn-${variant} btn-${size}${extra ? ` ${extra}` : ''}`}>
      {busy ? <span class="spinner" /> : icon ? <Icon name={icon} size={size === 'sm' ? 14 : 16} /> : null}
      {children}
    </button>
  );
}

// The label names only the control; the hint is linked as its description.
export function Field(props: { label: string; hint?: ComponentChildren; children: VNode; wide?: boolean }) {
  const id = useId();
  const control = cloneElement(props.children, { id, 'aria-describedby': props.hint ? `${id}-hint` : undefined });
  return (
    <div class={props.wide ? 'field field-wide' : 'field'}>
      <label class="field-label" for={id}>{props.label}</label>
      {control}
      {props.hint && <span class="field-hint" id={`${id}-hint`}>{props.hint}</span>}
    </div>
  );
}

// Runs an action with a busy flag and a toast for success or the API's error message.
export function useAction() {
  const [busy, setBusy] = useState(false);
  const run = useCallback(async <T,>(action: () => Promise<T>, success?: string): Promise<T | undefined> => {
    setBusy(true);
    try {
      const result = await action();
      if (success) toast(success);
      return result;
    } catch (err) {
      toastError(err);
      return undefined;
    } finally {
      setBusy(false);
    }
  }, []);
  return { busy, run };
}

// --- dialogs ------------------------------------------------------------------------------------

export function Modal(props: { title: string; onClose: () => void; children: ComponentChildren;
  footer?: ComponentChildren; wide?: boolean; closeOnBackdrop?: boolean }) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const dialog = ref.current;
    if (dialog && !dialog.open) dialog.showModal();
  }, []);
  return (
    <dialog
      ref={ref}
      class={props.wide ? 'modal modal-wide' : 'modal'}
      aria-label={props.title}
      onCancel={(e) => {
        e.preventDefault();
        props.onClose();
      }}
      onClick={(e) => {
        if (props.closeOnBackdrop !== false && e.target === ref.current) props.onClose();
      }}
    >
      <div class="modal-head">
        <h2>{props.title}</h2>
        <button type="button" class="icon-btn" aria-label="Close" onClick={props.onClose}><Icon name="x" /></button>
      </div>
      <div class="modal-body">{props.children}</div>
      {props.footer && <div class="modal-foot">{props.footer}</div>}
    </dialog>
  );
}

// A form inside a dialog: submit with Enter, a primary button, the API's error shown in place.
export function FormModal(props: { title: string; submitText: string; onClose: () => void;
  onSubmit: () => Promise<void>; children: ComponentChildren; wide?: boolean }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | null>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await props.onSubmit();
    } catch (err) {
      setError(asApiError(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <Modal title={props.title} onClose={props.onClose} wide={props.wide} closeOnBackdrop={false}>
      <form class="form" onSubmit={submit}>
        {error && <ErrorBox error={error} />}
        <div class="form-grid">{props.children}</div>
        <div class="modal-foot">
          <Button variant="ghost" onClick={props.onClose}>Cancel</Button>
          <Button variant="primary" type="submit" busy={busy}>{props.submitText}</Button>
        </div>
      </form>
    </Modal>
  );
}

export function Confirm(props: { title: string; message: ComponentChildren; confirmText: string;
  danger?: boolean; onConfirm: () => Promise<void> | void; onClose: () => void }) {
  const [busy, setBusy] = useState(false);
  return (
    <Modal title={props.title} onClose={props.onClose} footer={
      <>
        <Button variant="ghost" onClick={props.onClose}>Cancel</Button>
        <Button variant={props.danger ? 'danger' : 'primary'} busy={busy} onClick={async () => {
          setBusy(true);
          try {
            await props.onConfirm();
          } finally {
            setBusy(false);
          }
        }}>{props.confirmText}</Button>
      </>
    }>
      <p>{props.message}</p>
    </Modal>
  );
}

// --- tables -------------------------------------------------------------------------------------

export interface Column<T> {
  title: string;
  render: (row: T) => ComponentChildren;
  align?: 'right' | 'center';
  width?: string;
  class?: string;
}

export function Table<T>(props: { columns: Column<T>[]; rows: T[]; rowKey: (row: T) => string | number;
  empty?: ComponentChildren; label?: string }) {
  if (props.rows.length === 0) return <>{props.empty ?? <Empty title="Nothing here yet" />}</>;
  return (
    <div class="table-wrap">
      <table class="table" aria-label={props.label}>
        <thead>
          <tr>
            {props.columns.map((c) => (
              <th key={c.title} style={{ width: c.width, textAlign: c.align }}>{c.title}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {props.rows.map((row) => (
            <tr key={props.rowKey(row)}>
              {props.columns.map((c) => (
                <td key={c.title} class={c.class} style={{ textAlign: c.align }}>{c.render(row)}</td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export function Pager(props: { total: number; limit: number; offset: number; onChange: (offset: number) => void }) {
  const { total, limit, offset } = props;
  if (total === 0) return null;
  const first = total === 0 ? 0 : offset + 1;
  const last = Math.min(offset + limit, total);
  return (
    <div class="pager">
      <span class="muted">{first}–{last} of {total}</span>
      <div class="pager-buttons">
        <Button size="sm" variant="secondary" disabled={offset === 0}
          onClick={() => props.onChange(Math.max(0, offset - limit))}>Previous</Button>
        <Button size="sm" variant="secondary" disabled={offset + limit >= total}
          onClick={() => props.onChange(offset + limit)}>Next</Button>
      </div>
    </div>
  );
}

export function CopyButton({ text, label = 'Copy' }: { text: string; label?: string }) {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
    } catch {
      // Clipboard API needs a secure context; fall back to a selection copy.
      const area = document.createElement('textarea');
      area.value = text;
      document.body.appendChild(area);
      area.select();
      document.execCommand('copy');
      area.remove();
    }
    setCopied(true);
    setTimeout(() => setCopied(false), 2000);
  };
  if (!label) {  // icon only, for table cells
    return <Button size="sm" variant="ghost" icon={copied ? 'check' : 'copy'} onClick={copy}
      aria-label="Copy" title={copied ? 'Copied' : 'Copy'} />;
  }
  return <Button icon={copied ? 'check' : 'copy'} onClick={copy}>{copied ? 'Copied' : label}</Button>;
}
