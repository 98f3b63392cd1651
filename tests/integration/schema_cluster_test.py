#!/usr/bin/python3
"""The Schema Registry in a cluster (docs/design/0022-schemas.md, "Storage"): three
`sluice serve --etcd` brokers and a real etcd, each serving the registry on its own port.

- A schema registered on broker 1 is served by broker 2 (the same id, subject and version).
- Brokers 1 and 2 registering different schemas at the same time, from several threads:
  every schema gets its own id (none given twice), and both brokers list the same subjects,
  versions and ids afterwards.
- The same schema registered at once on both, under other subjects: one id.
- With broker 1 stopped, broker 2 still answers and registers (it becomes the writer).

usage: /usr/bin/python3 schema_cluster_test.py path/to/sluice
"""

import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_controller_test import ClusterBroker, start_together  # noqa: E402
from etcd_util import free_ports, main_with_etcd  # noqa: E402
from sluice_broker import check, wait_until  # noqa: E402

CT = "application/vnd.schemaregistry.v1+json"


class RegistryBroker(ClusterBroker):
    def __init__(self, sluice, node, etcd_url):
        super().__init__(sluice, node, etcd_url)
        self.registry_port = free_ports(1)[0]
        self.url = f"http://127.0.0.1:{self.registry_port}"

    def args(self, etcd=True):
        a = super().args(etcd)
        a[a.index("--schema-registry-addr") + 1] = f"127.0.0.1:{self.registry_port}"
        return a


def call(url, method, path, body=None):
    """(HTTP status, parsed body); (0, None) when the registry cannot be reached in time."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url + path, data=data, method=method,
                                 headers={"Content-Type": CT, "Accept": CT})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, None


SLOWEST = [0.0]


def register(url, subject, schema):
    started = time.monotonic()
    code, answer = call(url, "POST", f"/subjects/{subject}/versions",
                        {"schema": json.dumps(schema)})
    SLOWEST[0] = max(SLOWEST[0], time.monotonic() - started)
    check(code == 200, f"register {subject} at {url}: {code} {answer}")
    return answer["id"]


def record(name, n):
    return {"type": "record", "name": name,
            "fields": [{"name": f"f{i}", "type": "long"} for i in range(n)]}


def listing(url):
    code, answer = call(url, "GET", "/schemas")
    check(code == 200, f"GET /schemas at {url}: {code}")
    return sorted((s["subject"], s["version"], s["id"]) for s in answer)


def run(sluice, etcd, tmp):
    brokers = [RegistryBroker(sluice, n, etcd.endpoints_arg()) for n in (1, 2, 3)]
    try:
        start_together(brokers)
        one, two, _ = brokers
        for b in brokers:
            wait_until(lambda b=b: call(b.url, "GET", "/subjects")[0] == 200, 60,
                       f"broker {b.node}'s registry")
        first = register(one.url, "a-value", record("A", 1))
        got = wait_until(lambda: call(two.url, "GET", f"/schemas/ids/{first}")[0] == 200 and
                         call(two.url, "GET", "/subjects/a-value/versions/latest")[1], 30,
                         "broker 2 serving broker 1's schema")
        check(got["id"] == first and got["version"] == 1, f"broker 2's answer: {got}")

        # Writers on two brokers at once.
        ids, errors = [], []

        def writer(url, tag):
            try:
                for i in range(6):
                    ids.append(register(url, f"{tag}-{i}-value",
                                        record(f"{tag.upper()}{i}", i + 1)))
            except Exception as e:  # collected: a thread's failure fails the test below
                errors.append(e)

        threads = [threading.Thread(target=writer, args=(b.url, f"{t}{b.node}"))
                   for b in (one, two) for t in ("x", "y")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        check(not errors, f"concurrent registrations: {errors}")
        check(len(ids) == 24 and len(set(ids)) == 24, f"24 schemas, 24 ids: {sorted(ids)}")
        print(f"the slowest registration under contention: {SLOWEST[0]:.1f} s")
        check(first not in ids, "no id given twice")
        wait_until(lambda: listing(one.url) == listing(two.url) and len(listing(one.url)) == 25,
                   30, "both brokers listing the same 25 versions")

        # One schema, registered on both at once under two subjects: one id.
        same = []
        t1 = threading.Thread(
            target=lambda: same.append(register(one.url, "s1-value", record("S", 3))))
        t2 = threading.Thread(
            target=lambda: same.append(register(two.url, "s2-value", record("S", 3))))
        t1.start()
        t2.start()
        t1.join()
        t2.join()
        check(len(same) == 2 and same[0] == same[1], f"the same schema, one id: {same}")

        # Broker 1 gone: broker 2 answers and writes.
        check(one.stop() == 0, "broker 1 stops cleanly")
        wait_until(lambda: call(two.url, "GET", f"/schemas/ids/{first}")[0] == 200, 60,
                   "broker 2 answering with broker 1 gone")
        # The writer's transactional id may have had its coordinator on broker 1: it moves.
        late = wait_until(
            lambda: (lambda r: r if r[0] == 200 else None)(
                call(two.url, "POST", "/subjects/late-value/versions",
                     {"schema": json.dumps(record("Late", 2))})),
            150, "a registration on broker 2 alone")
        check(late[1]["id"] not in ids + [first, same[0]], f"broker 2 alone gives a new id: {late}")
        for b in brokers[1:]:
            check(b.stop() == 0, f"broker {b.node} stops cleanly")
    except Exception:
        for b in brokers:
            print(b.logs(80))
        raise
    finally:
        for b in brokers:
            if b.proc is not None:
                b.kill()


if __name__ == "__main__":
    sys.exit(main_with_etcd("schema_cluster_test", run, "sluice-schema-cluster-"))
