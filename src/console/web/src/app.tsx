// The page's frame: the navigation, the login, the theme toggle, and the page the path names.
import { Component, type ComponentChildren, type ComponentType } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { loginState, logOut, onLoginChange, type LoginState } from "./api";
import { LoginForm } from "./components/login-form";
import { ErrorBox, Link, Loading } from "./components/ui";
import { Group } from "./pages/group";
import { Groups } from "./pages/groups";
import { Overview } from "./pages/overview";
import { Pipelines } from "./pages/pipelines";
import { Tables } from "./pages/tables";
import { Topic } from "./pages/topic";
import { Topics } from "./pages/topics";
import { match, usePath, type Route } from "./router";
import { setThemeChoice, themeChoice, type ThemeChoice } from "./theme";
import { asApiError, useTitle } from "./hooks";

const kNav: { href: string; label: string; pages: Route["page"][] }[] = [
  { href: "/start", label: "Start", pages: ["start"] },
  { href: "/", label: "Overview", pages: ["overview"] },
  { href: "/topics", label: "Topics", pages: ["topics", "topic"] },
  { href: "/groups", label: "Consumer groups", pages: ["groups", "group"] },
  { href: "/pipelines", label: "Pipelines", pages: ["pipelines", "new-pipeline", "pipeline"] },
  { href: "/tables", label: "Tables", pages: ["tables", "table"] },
  { href: "/sql", label: "SQL", pages: ["sql"] },
];

export function App() {
  const path = usePath();
  const route = match(path);
  const login = useLogin();
  // After a login the focus, left on the form that went, moves to the page.
  const main = useRef<HTMLElement>(null);
  const asking = useRef(login.asking);
  useEffect(() => {
    if (asking.current !== null && login.asking === null) {
      main.current?.focus({ preventScroll: true });
    }
    asking.current = login.asking;
  }, [login.asking]);
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <Link href="/" class="brand">
          sluice
        </Link>
        <nav aria-label="sections">
          {kNav.map((n) => (
            <Link
              key={n.href}
              href={n.href}
              class={n.pages.includes(route.page) ? "current" : undefined}
            >
              {n.label}
            </Link>
          ))}
        </nav>
        {login.user !== null && (
          <div class="who">
            <span>
              <span class="sr-only">Logged in as </span>
              {login.user}
            </span>
            <button type="button" onClick={logOut}>
              Log out
            </button>
          </div>
        )}
        <ThemeToggle />
      </header>
      <main id="main" tabIndex={-1} ref={main}>
        {login.asking !== null && <LoginForm asking={login.asking} lastUser={login.lastUser} />}
        {/* While the form asks again (a token that ran out), the page stays, hidden: what
            was typed there is kept, and it loads again only if a request of it was refused.
            With nobody logged in there is no page to keep. */}
        {login.asking !== "login" && (
          <div hidden={login.asking !== null}>
            <Contained key={`${login.reloads} ${path}`}>
              <Page route={route} />
            </Contained>
          </div>
        )}
      </main>
    </>
  );
}

// The login's state (api.ts), re-rendering on its changes.
function useLogin(): LoginState {
  const [state, setState] = useState(loginState());
  useEffect(() => {
    const unsubscribe = onLoginChange(setState);
    setState(loginState());  // a change before this effect ran
    return unsubscribe;
  }, []);
  return state;
}

// The pages with an editor, a grid or a walk-through are chunks of their own, fetched when
// first opened: the list pages a visit starts on parse less script before their first
// paint (docs/design/0026-console.md #5).
const kStart = () => import("./pages/start").then((m) => m.Start);
const kSql = () => import("./pages/sql").then((m) => m.Sql);
const kPipeline = () => import("./pages/pipeline").then((m) => m.Pipeline);
const kNewPipeline = () => import("./pages/pipeline").then((m) => m.NewPipeline);
const kTable = () => import("./pages/table").then((m) => m.Table);

const loaded = new Map<unknown, ComponentType<never>>();

function Lazy<P extends object>(props: { load: () => Promise<ComponentType<P>>; props: P }) {
  const [page, setPage] = useState<ComponentType<P> | undefined>(
    () => loaded.get(props.load) as ComponentType<P> | undefined,
  );
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    if (page) return;
    let live = true;
    props.load().then(
      (p) => {
        loaded.set(props.load, p as ComponentType<never>);
        if (live) setPage(() => p);
      },
      (e: unknown) => live && setError(e),
    );
    return () => {
      live = false;
    };
  }, [props.load]);
  if (error) return <ErrorBox error={asApiError(error)} />;
  if (!page) return <Loading when />;
  const P = page;
  return <P {...props.props} />;
}

function Page(props: { route: Route }) {
  const r = props.route;
  switch (r.page) {
    case "start":
      return <Lazy load={kStart} props={{}} />;
    case "overview":
      return <Overview />;
    case "topics":
      return <Topics />;
    case "topic":
      return <Topic key={r.name} name={r.name} />;
    case "groups":
      return <Groups />;
    case "group":
      return <Group key={r.id} id={r.id} />;
    case "pipelines":
      return <Pipelines />;
    case "new-pipeline":
      return <Lazy load={kNewPipeline} props={{}} />;
    case "pipeline":
      return <Lazy key={r.name} load={kPipeline} props={{ name: r.name }} />;
    case "tables":
      return <Tables />;
    case "table":
      return (
        <Lazy
          key={`${r.namespace}/${r.name}`}
          load={kTable}
          props={{ namespace: r.namespace, name: r.name }}
        />
      );
    case "sql":
      return <Lazy load={kSql} props={{}} />;
    case "not-found":
      return <NotFound />;
  }
}

function NotFound() {
  useTitle("Not found");
  return (
    <section>
      <h1>Not found</h1>
      <p>
        The console has no page at this address. <Link href="/">Go to the overview</Link>.
      </p>
    </section>
  );
}

// A page that fails to render (an answer of an unexpected shape) shows why, and the
// navigation and other pages go on working. Keyed by path and login: another page, or the
// same page after a login that followed a refused request, starts afresh.
class Contained extends Component<{ children: ComponentChildren }, { error?: unknown }> {
  state: { error?: unknown } = {};
  componentDidCatch(error: unknown) {
    this.setState({ error });
  }
  render() {
    if (this.state.error === undefined) return this.props.children;
    return (
      <section>
        <h1>This page failed</h1>
        <div class="error" role="alert">
          {String(this.state.error)}
        </div>
        <button type="button" onClick={() => this.setState({ error: undefined })}>
          Try again
        </button>
      </section>
    );
  }
}

const kNextTheme: Record<ThemeChoice, ThemeChoice> = {
  system: "light",
  light: "dark",
  dark: "system",
};

// Cycles system → light → dark; the choice is kept in localStorage.
function ThemeToggle() {
  const [choice, setChoice] = useState(themeChoice());
  const next = kNextTheme[choice];
  return (
    <button
      type="button"
      class="theme"
      title={`Theme: ${choice}; switch to ${next}`}
      onClick={() => {
        setThemeChoice(next);
        setChoice(next);
      }}
    >
      Theme: {choice}
    </button>
  );
}
