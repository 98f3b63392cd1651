// Consumer groups: each with its state, members and lag.
import { useState } from "preact/hooks";
import { paths, request } from "../api";
import { ErrorBox, Link, Loading } from "../components/ui";
import * as fmt from "../format";
import { useResource, useTitle } from "../hooks";
import { hrefs } from "../router";
import type { GroupSummary } from "../types";

export function Groups() {
  useTitle("Consumer groups");
  const [filter, setFilter] = useState("");
  const list = useResource(() => request<{ groups: GroupSummary[] }>("GET", paths.groups), "");
  const needle = filter.trim().toLowerCase();
  const groups = (list.data?.groups ?? [])
    .filter((g) => g.group_id.toLowerCase().includes(needle))
    .sort((a, b) => fmt.compareText(a.group_id, b.group_id));
  return (
    <section>
      <h1>Consumer groups</h1>
      <div class="toolbar">
        <input
          type="search"
          placeholder="Filter by id"
          aria-label="Filter groups by id"
          value={filter}
          onInput={(e) => setFilter(e.currentTarget.value)}
        />
        <button type="button" onClick={list.reload} disabled={list.loading}>
          Refresh
        </button>
      </div>
      <ErrorBox error={list.error} />
      <Loading when={list.loading && !list.data} />
      {list.data && (
        <table>
          <thead>
            <tr>
              <th scope="col">Group</th>
              <th scope="col">State</th>
              <th scope="col">Kind</th>
              <th scope="col" class="num">Members</th>
              <th scope="col" class="num">Lag</th>
            </tr>
          </thead>
          <tbody>
            {groups.map((g) => (
              <tr key={g.group_id}>
                <td>
                  <Link href={hrefs.group(g.group_id)}>{g.group_id}</Link>
                </td>
                <td>{g.state}</td>
                <td>{g.simple ? "offsets only" : "consumer group"}</td>
                <td class="num">{fmt.count(g.members)}</td>
                <td class="num">{fmt.count(g.lag)}</td>
              </tr>
            ))}
            {groups.length === 0 && (
              <tr>
                <td colSpan={5} class="muted">
                  {needle ? "No group matches the filter." : "No consumer groups."}
                </td>
              </tr>
            )}
          </tbody>
        </table>
      )}
    </section>
  );
}
