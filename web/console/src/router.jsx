// Path routing under /console/: links push history entries, the Go handler
// answers every /console/… path that is not an asset with index.html.
import { useEffect, useState } from 'preact/hooks';

export const BASE = '/console';

export function navigate(path, replace = false) {
  const url = BASE + path;
  if (replace) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  window.dispatchEvent(new Event('capstan-route'));
}

// currentPath is the location under BASE: "/" for /console and /console/.
export function currentPath() {
  return location.pathname.slice(BASE.length) || '/';
}

export function useRoute() {
  const [path, setPath] = useState(currentPath());
  useEffect(() => {
    const on = () => setPath(currentPath());
    window.addEventListener('popstate', on);
    window.addEventListener('capstan-route', on);
    return () => {
      window.removeEventListener('popstate', on);
      window.removeEventListener('capstan-route', on);
    };
  }, []);
  return path;
}

// match returns the named segments of path against a pattern such as
// "/endpoints/:name", or null.
export function match(pattern, path) {
  const p = pattern.split('/').filter(Boolean);
  const s = path.split('/').filter(Boolean);
  if (p.length !== s.length) return null;
  const params = {};
  for (let i = 0; i < p.length; i++) {
    if (p[i].startsWith(':')) params[p[i].slice(1)] = decodeURIComponent(s[i]);
    else if (p[i] !== s[i]) return null;
  }
  return params;
}

// Link is an <a> that routes without reloading the page.
export function Link({ href, children, ...rest }) {
  const onClick = (e) => {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(href);
  };
  return (
    <a href={BASE + href} onClick={onClick} {...rest}>
      {children}
    </a>
  );
}
