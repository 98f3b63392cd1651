#!/usr/bin/python3
"""SQL grants are cluster-wide (docs/design/0020-data-authorization.md, decision 4): two
`sluice serve --etcd` brokers with authorization on and a real etcd; a role and a grant
made through broker 1's query server are in force on broker 2's (SHOW GRANTS, a read of
the granted directory), a revocation too, and a broker started afterwards loads them.

usage: /usr/bin/python3 cluster_grants_test.py path/to/sluice
"""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_controller_test import start_together  # noqa: E402
from cluster_pipeline_test import PSQL, QueryBroker  # noqa: E402
from etcd_util import main_with_etcd  # noqa: E402
from sluice_broker import check, wait_until  # noqa: E402

AUTHORIZATION = """
query:
  users: ["admin:admin-pw", "alice:alice-pw"]
  allowed_directories: ["{dir}"]
authorization:
  enabled: true
  super_users: ["User:admin", "User:ANONYMOUS"]
"""


class GrantsBroker(QueryBroker):
    """A cluster broker whose config also turns authorization on (the brokers talk over
    PLAINTEXT, as User:ANONYMOUS, a super user here: this test is about SQL grants)."""

    def __init__(self, sluice, node, etcd_url, files):
        super().__init__(sluice, node, etcd_url)
        self.files = files

    def args(self, etcd=True):
        a = super().args(etcd)
        with open(a[a.index("--config") + 1], "a") as f:
            f.write(AUTHORIZATION.format(dir=self.files))
        return a


def psql(broker, user, sql):
    """(returncode, stdout, stderr) of one statement as `user`."""
    r = subprocess.run([PSQL, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
                        "-p", str(broker.pg_port), "-U", user, "-d", "sluice", "-c", sql],
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PGPASSWORD=f"{user}-pw", PGCONNECT_TIMEOUT="10"))
    return r.returncode, r.stdout.strip(), r.stderr.strip()


def ok(broker, user, sql):
    rc, out, err = psql(broker, user, sql)
    check(rc == 0, f"psql as {user} on broker {broker.node}: {sql}: {err}")
    return out


def wait_pg(broker):
    """The query server answers (it listens a moment after the Kafka port)."""
    wait_until(lambda: psql(broker, "admin", "SELECT 1")[0] == 0, 30,
               f"broker {broker.node}'s query server")


def run(sluice, etcd, tmp):
    files = os.path.join(tmp, "files")
    os.makedirs(files)
    brokers = [GrantsBroker(sluice, n, etcd.endpoints_arg(), files) for n in (1, 2)]
    late = None
    try:
        start_together(brokers)
        one, two = brokers
        for b in brokers:
            wait_pg(b)
        ok(one, "admin", f"COPY (SELECT 5 AS x) TO '{files}/x.parquet'")
        read = f"SELECT x FROM read_parquet('{files}/x.parquet')"
        rc, _, err = psql(two, "alice", read)
        check(rc != 0 and "permission denied" in err, f"alice read before any grant: {err}")

        ok(one, "admin", "CREATE ROLE readers")
        ok(one, "admin", "GRANT readers TO alice")
        ok(one, "admin", f"GRANT READ ON DIRECTORY '{files}' TO readers")
        wait_until(lambda: psql(two, "alice", read)[1] == "5", 30,
                   "broker 2 applying broker 1's grant")
        check(f"DIRECTORY '{files}'" in ok(two, "alice", "SHOW GRANTS"),
              "SHOW GRANTS on broker 2 lacks the grant")

        # A broker that starts later loads them from etcd.
        late = GrantsBroker(sluice, 3, etcd.endpoints_arg(), files)
        start_together([late])
        wait_pg(late)
        check(ok(late, "alice", read) == "5", "broker 3 did not load the grants")

        # A revocation on broker 2 holds on broker 1.
        ok(two, "admin", "REVOKE readers FROM alice")
        wait_until(lambda: psql(one, "alice", read)[0] != 0, 30,
                   "broker 1 applying broker 2's revocation")
    finally:
        for b in brokers + ([late] if late else []):
            b.cleanup()


def main():
    return main_with_etcd("cluster_grants_test", run, "sluice-clgrants-",
                          None if PSQL else "psql is missing (scripts/setup.sh installs postgresql-client)")


if __name__ == "__main__":
    sys.exit(main())
