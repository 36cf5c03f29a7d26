// A small history router under the console's base path (/console/).

import { useEffect, useState } from 'preact/hooks';

const BASE = import.meta.env.BASE_URL.replace(/\/$/, '');

export function currentRoute(): string {
  const path = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) : location.pathname;
  return path.replace(/^\/+|\/+$/g, '');
}

export function href(route: string): string {
  return `${BASE}/${route}`;
}

export function navigate(route: string, replace = false): void {
  const target = href(route);
  if (target === location.pathname) return;
  if (replace) history.replaceState(null, '', target);
  else history.pushState(null, '', target);
  dispatchEvent(new PopStateEvent('popstate'));
}

export function useRoute(): string {
  const [route, setRoute] = useState(currentRoute());
  useEffect(() => {
    const onPop = () => setRoute(currentRoute());
    addEventListener('popstate', onPop);
    return () => removeEventListener('popstate', onPop);
  }, []);
  return route;
}

// Links stay real anchors (open in new tab works) but navigate without a reload.
export function onLinkClick(route: string) {
  return (e: MouseEvent) => {
    if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(route);
  };
}
