// The management API client: envelopes, CSRF, and the error shapes of spec 7.3 / 7.4.

export const API = '/api/v1';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly traceId: string | null = null,
  ) {
    super(message);
  }
}

type Query = Record<string, string | number | boolean | null | undefined>;

let csrfToken = '';
let onUnauthorized: () => void = () => {};

export function setCsrf(token: string): void {
  csrfToken = token;
}

export function setUnauthorizedHandler(handler: () => void): void {
  onUnauthorized = handler;
}

function url(path: string, query?: Query): string {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query ?? {})) {
    if (v !== undefined && v !== null && v !== '') params.set(k, String(v));
  }
  const qs = params.toString();
  return `${API}${path}${qs ? `?${qs}` : ''}`;
}

// Every refusal shape the API can answer with, turned into one readable error.
function toError(status: number, body: any, traceId: string | null): ApiError {
  const err = body?.error && typeof body.error === 'object' ? body.error : body;
  const code: string = err?.code ?? (status >= 500 ? 'INTERNAL_ERROR' : 'BAD_REQUEST');
  const message: string = err?.message ?? `Request failed with status ${status}`;
  return new ApiError(status, code, message, body?.traceId ?? traceId);
}

async function call<T>(method: string, path: string, body?: unknown, query?: Query, quiet401 = false): Promise<T> {
  const headers: Record<string, string> = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (method !== 'GET' && csrfToken) headers['X-CSRF-Token'] = csrfToken;
  let response: Response;
  try {
    response = await fetch(url(path, query), {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
    });
  } catch {
    throw new ApiError(0, 'NETWORK_ERROR', 'The gateway could not be reached. Check that it is running.');
  }
  const traceId = response.headers.get('x-trace-id');
  let payload: any = null;
  const text = await response.text();
  if (text) {
    try {
      payload = JSON.parse(text);
    } catch {
      payload = { message: text.slice(0, 200) };
    }
  }
  if (!response.ok || payload?.success === false) {
    if (response.status === 401 && !quiet401) onUnauthorized();
    throw toError(response.status, payload, traceId);
  }
  return payload?.data as T;
}

export const api = {
  get: <T>(path: string, query?: Query) => call<T>('GET', path, undefined, query),
  post: <T>(path: string, body?: unknown) => call<T>('POST', path, body ?? {}),
  put: <T>(path: string, body: unknown) => call<T>('PUT', path, body),
  patch: <T>(path: string, body: unknown) => call<T>('PATCH', path, body),
  del: <T>(path: string) => call<T>('DELETE', path),
  // The session probe at start-up: a 401 there just means "show the login page".
  me: () => call<Session>('GET', '/auth/me', undefined, undefined, true),
  login: (username: string, password: string) =>
    call<Session>('POST', '/auth/login', { username, password }, undefined, true),
};

// --- shapes (see modelgate/api/schemas.py) ---------------------------------------------------

export type Role = 'ADMIN' | 'USER';
export type Capability = 'streaming' | 'functionCalling' | 'vision' | 'reasoning';

export interface User {
  id: number;
  username: string;
  role: Role;
  enabled: boolean;
  createdAt: string;
}

export interface Session {
  user: User;
  csrfToken: string;
  expiresAt: string;
}

export interface Totals {
  requestCount: number;
  successCount: number;
  errorCount: number;
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  cost: Record<string, number>;
}

export interface Stats extends Totals {
  date: string;
  unpricedModels: string[];
}

export interface TrendPoint extends Totals {
  date: string;
}

export interface ModelUsage extends Totals {
  model: string;
  priced: boolean;
  tokenShare: number;
}

export interface ProviderKind {
  kind: string;
  label: string;
  defaultBaseUrl: string | null;
  baseUrlNote: string;
  docsUrl: string;
  keyRequired: boolean;
  keylessAuth: string[];
  options: string[];
}

export interface ProviderKey {
  id: number;
  label: string;
  hint: string;
  enabled: boolean;
  createdAt: string;
}

export interface Provider {
  id: number;
  name: string;
  kind: string;
  baseUrl: string;
  options: Record<string, unknown>;
  enabled: boolean;
  keys: ProviderKey[];
  createdAt: string;
}

export interface ModelInstance {
  id: number;
  channelId: number;
  modelId: string;
  upstreamModel: string;
  ownedBy: string | null;
  capabilities: Capability[];
  state: 'ACTIVE' | 'DEPRECATED' | 'DISABLED';
  stateChangedAt: string | null;
  createdAt: string;
}

export interface Breaker {
  endpointId: string;
  keyHint: string | null;
  state: 'CLOSED' | 'OPEN' | 'HALF_OPEN' | 'UNKNOWN';
  failures: number;
  openedAt: string | null;
  retryAfterSeconds: number | null;
}

export interface Channel {
  id: number;
  name: string;
  providerId: number;
  providerName: string;
  providerKind: string;
  priority: number;
  weight: number;
  enabled: boolean;
  models: ModelInstance[];
  breakers: Breaker[];
  createdAt: string;
}

export interface HealthCheck {
  channelId: number;
  ok: boolean;
  latencyMs: number;
  errorType: string | null;
  message: string | null;
  model: string | null;
  endpoints: { endpointId: string; ok: boolean; latencyMs: number; errorType: string | null; message: string | null }[];
  checkedAt: string;
}

export interface Application {
  id: number;
  name: string;
  description: string;
  timeout: number;
  enabled: boolean;
  ownerId: number | null;
  channelIds: number[];
  createdAt: string;
}

export interface ApiKey {
  id: number;
  applicationId: number;
  name: string;
  prefix: string;
  status: 'ENABLED' | 'DISABLED' | 'DELETED';
  rateCapacity: number | null;
  rateRefillPerSecond: number | null;
  createdAt: string;
  lastUsedAt: string | null;
}

export interface CreatedKey {
  key: ApiKey;
  plaintext: string;
}

export interface CatalogProvider {
  kind: string;
  name: string;
  pricingUrl: string | null;
  supported: boolean;
  defaultBaseUrl: string | null;
  keyRequired: boolean;
  defaultPlanCode: string | null;
  planCodes: string[];
  modelCount: number;
}

export interface Plan {
  planCode: string;
  providerKind: string;
  providerName: string;
  name: string;
  type: string;
  currency: string;
  default: boolean;
  description: string;
  modelCount: number;
  pricesCheckedAt: string;
}

export interface CatalogModel {
  id: string;
  name: string;
  aliases: string[];
  inputPrice: number;
  outputPrice: number;
  currency: string;
  contextWindow: number | null;
  capabilities: Capability[];
  providerKind: string;
  providerName: string;
  planCode: string;
  plans: string[];
}

export interface Pricing {
  planCode: string;
  providerKind: string;
  currency: string;
  unit: string;
  pricesCheckedAt: string;
  prices: { model: string; inputPrice: number; outputPrice: number }[];
}

export interface CallLog {
  id: number;
  traceId: string;
  createdAt: string;
  keyId: number | null;
  applicationId: number | null;
  channelId: number | null;
  providerKind: string | null;
  protocol: string;
  model: string;
  stream: boolean;
  status: number;
  errorCode: string | null;
  latencyMs: number;
  firstByteMs: number | null;
  attempts: number;
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  clientIp: string | null;
}

export interface ResilienceEvent {
  id: number;
  createdAt: string;
  type: string;
  traceId: string | null;
  channelId: number | null;
  endpointId: string | null;
  model: string | null;
  errorType: string | null;
  detail: string;
}

export interface Page<T> {
  items: T[];
  total: number;
  limit: number;
  offset: number;
}

export interface BlacklistEntry {
  id: number;
  cidr: string;
  reason: string;
  createdAt: string;
}

export interface ApiToken {
  id: number;
  name: string;
  prefix: string;
  role: Role;
  userId: number;
  createdBy: string;
  createdAt: string;
  expiresAt: string | null;
  lastUsedAt: string | null;
  revokedAt: string | null;
}

export interface CreatedApiToken {
  token: ApiToken;
  plaintext: string;
}

export interface AuditEntry {
  id: number;
  createdAt: string;
  actor: string;
  userId: number | null;
  via: string;
  action: string;
  target: string;
  status: number;
  clientIp: string | null;
  traceId: string | null;
}
