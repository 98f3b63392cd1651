// The page's frame: the navigation, the theme toggle, and the page the path names.
import { Component, type ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import { Link } from "./components/ui";
import { Group } from "./pages/group";
import { Groups } from "./pages/groups";
import { Overview } from "./pages/overview";
import { NewPipeline, Pipeline } from "./pages/pipeline";
import { Pipelines } from "./pages/pipelines";
import { Sql } from "./pages/sql";
import { Start } from "./pages/start";
import { Table } from "./pages/table";
import { Tables } from "./pages/tables";
import { Topic } from "./pages/topic";
import { Topics } from "./pages/topics";
import { match, usePath, type Route } from "./router";
import { setThemeChoice, themeChoice, type ThemeChoice } from "./theme";
import { useTitle } from "./hooks";

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
        <ThemeToggle />
      </header>
      <main id="main" tabIndex={-1}>
        <Contained key={path}>
          <Page route={route} />
        </Contained>
      </main>
    </>
  );
}

function Page(props: { route: Route }) {
  const r = props.route;
  switch (r.page) {
    case "start":
      return <Start />;
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
      return <NewPipeline />;
    case "pipeline":
      return <Pipeline key={r.name} name={r.name} />;
    case "tables":
      return <Tables />;
    case "table":
      return <Table key={`${r.namespace}/${r.name}`} namespace={r.namespace} name={r.name} />;
    case "sql":
      return <Sql />;
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
// navigation and other pages go on working. Keyed by path: another page starts afresh.
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
