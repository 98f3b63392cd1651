// Client-side routing by location.pathname with the History API: the server answers
// index.html for every page path (docs/design/0026-console.md #5), so a reload or a link
// opened in a new tab lands on the same page.
import { useEffect, useState } from "preact/hooks";

const kChange = "sluice:navigate";

export function navigate(to: string, replace = false): void {
  if (to === location.pathname + location.search) return;
  if (replace) history.replaceState(null, "", to);
  else history.pushState(null, "", to);
  window.dispatchEvent(new Event(kChange));
  window.scrollTo(0, 0);
}

// The current path (percent-encoded, as in the address bar); re-renders on navigation.
export function usePath(): string {
  const [path, setPath] = useState(location.pathname);
  useEffect(() => {
    const update = () => setPath(location.pathname);
    window.addEventListener("popstate", update);
    window.addEventListener(kChange, update);
    return () => {
      window.removeEventListener("popstate", update);
      window.removeEventListener(kChange, update);
    };
  }, []);
  return path;
}

// A click on a link of the page: handled here unless the browser should handle it (a
// modified click opens a tab or window; a middle click never reaches "click").
export function onLinkClick(e: MouseEvent): void {
  if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) {
    return;
  }
  const a = e.currentTarget as HTMLAnchorElement;
  if (a.target || a.origin !== location.origin) return;
  e.preventDefault();
  navigate(a.pathname + a.search);
}

export type Route =
  | { page: "start" }
  | { page: "overview" }
  | { page: "topics" }
  | { page: "topic"; name: string }
  | { page: "groups" }
  | { page: "group"; id: string }
  | { page: "pipelines" }
  | { page: "tables" }
  | { page: "table"; namespace: string; name: string }
  | { page: "sql" }
  | { page: "new-pipeline" }
  | { page: "pipeline"; name: string }
  | { page: "not-found" };

export function match(path: string): Route {
  const parts = path.split("/").slice(1);
  if (parts.length > 1 && parts[parts.length - 1] === "") parts.pop();  // a trailing '/'
  let names: string[];
  try {
    names = parts.map(decodeURIComponent);
  } catch {
    return { page: "not-found" };  // a malformed %-escape
  }
  const [first = "", second, third] = names;
  if (names.length === 1) {
    switch (first) {
      case "":
        return { page: "overview" };
      case "topics":
        return { page: "topics" };
      case "groups":
        return { page: "groups" };
      case "start":
      case "pipelines":
      case "tables":
      case "sql":
        return { page: first };
    }
  }
  if (names.length === 2 && second !== undefined && second !== "") {
    if (first === "topics") return { page: "topic", name: second };
    if (first === "groups") return { page: "group", id: second };
    if (first === "pipelines") {
      // "/pipelines/new" is the editor of a new pipeline; a pipeline named "new" has the
      // address "/pipelines/%6Eew" (hrefs.pipeline), told apart before decoding.
      if (parts[1] === "new") return { page: "new-pipeline" };
      return { page: "pipeline", name: second };
    }
  }
  if (names.length === 3 && first === "tables" && second && third) {
    return { page: "table", namespace: second, name: third };
  }
  return { page: "not-found" };
}

export const hrefs = {
  topic: (name: string) => `/topics/${encodeURIComponent(name)}`,
  group: (id: string) => `/groups/${encodeURIComponent(id)}`,
  newPipeline: "/pipelines/new",
  pipeline: (name: string) =>
    name === "new" ? "/pipelines/%6Eew" : `/pipelines/${encodeURIComponent(name)}`,
  // `namespace`: its levels joined by '.', as the tables API names it.
  table: (namespace: string, name: string) =>
    `/tables/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`,
  // The SQL page with `sql` in its editor (pages/sql.tsx reads it once).
  sql: (sql: string) => `/sql?${new URLSearchParams({ sql })}`,
};
