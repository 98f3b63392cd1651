// Tables and SQL: in the navigation now, built in phase B of the console
// (docs/design/0026-console.md #10). No made-up data meanwhile.
import { useTitle } from "../hooks";

const kText = {
  tables: {
    title: "Tables",
    what: "the lake's tables: their schemas, snapshots and files",
  },
  sql: {
    title: "SQL",
    what: "an editor that runs queries on the query engine and shows their results",
  },
};

export function Later(props: { page: keyof typeof kText }) {
  const t = kText[props.page];
  useTitle(t.title);
  return (
    <section>
      <h1>{t.title}</h1>
      <p>This page comes with the console's next phase: {t.what}.</p>
    </section>
  );
}
