"""etcd_util.py: real etcd for Python integration tests (the twin of the C++ fixture
src/cluster/tests/etcd_fixture.h).

    with EtcdCluster(members=3) as etcd:        # or EtcdCluster().start() ... close()
        sluice = start_broker(etcd_endpoints=etcd.endpoints)
        etcd.kill(0); etcd.restart(0); etcd.pause(1); etcd.resume(1)
        etcd.put("/k", "v"); etcd.get("/k"); etcd.get_prefix("/sluice/")

Members listen on 127.0.0.1 with free ports; data directories live on tmpfs (/dev/shm,
since etcd 3.4 cannot skip fsync) and are removed on close (SLUICE_KEEP_ETCD=1 keeps
them). Every process started here is killed at close and, should a test forget, at exit.
Standard library only; speaks etcd's JSON gateway (base64 keys and values, int64 as
strings, defaults left out).
"""

import atexit
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

ETCD = "/usr/bin/etcd"

_live = set()  # clusters not closed yet, killed at exit


@atexit.register
def _kill_leftovers():
    for c in list(_live):
        c.close()


def unavailable(binary=ETCD):
    """'' when etcd can run here, otherwise why not (tests skip with it)."""
    if not os.access(binary, os.X_OK):
        return "%s is not installed (apt-get install etcd-server)" % binary
    if not os.path.isdir("/dev/shm"):
        return "/dev/shm (tmpfs for etcd's data) is missing"
    return ""


def free_ports(n):
    """n distinct loopback ports free right now."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def b64(data):
    if isinstance(data, str):
        data = data.encode()
    return base64.b64encode(data).decode()


def unb64(text):
    return base64.b64decode(text or "")


def prefix_end(prefix):
    """etcd's range_end covering every key that starts with `prefix` (bytes)."""
    p = bytearray(prefix.encode() if isinstance(prefix, str) else prefix)
    while p:
        if p[-1] < 0xFF:
            p[-1] += 1
            return bytes(p)
        p.pop()
    return b"\0"


class EtcdError(Exception):
    pass


class EtcdCluster:
    def __init__(self, members=1, binary=ETCD, progress_notify_interval_ms=0,
                 heartbeat_ms=50, election_ms=500, start_timeout=30.0):
        if members < 1:
            raise ValueError("members must be >= 1")
        self.binary = binary
        self.size = members
        self.progress_notify_interval_ms = progress_notify_interval_ms
        self.heartbeat_ms, self.election_ms = heartbeat_ms, election_ms
        self.start_timeout = start_timeout
        self.base_dir = None
        self.procs = [None] * members
        self.logs = [None] * members
        ports = free_ports(2 * members)
        self.client_ports = ports[0::2]
        self.peer_ports = ports[1::2]
        self.names = ["m%d" % i for i in range(members)]

    # ---- lifecycle

    def start(self):
        why = unavailable(self.binary)
        if why:
            raise EtcdError(why)
        self.base_dir = tempfile.mkdtemp(prefix="sluice-etcd-", dir="/dev/shm")
        self.token = "sluice-test-" + os.path.basename(self.base_dir)
        _live.add(self)
        try:
            for i in range(self.size):
                self._spawn(i)
            for i in range(self.size):
                self.wait_healthy(i)
        except BaseException:
            self.close()
            raise
        return self

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    def close(self):
        for i in range(self.size):
            self.kill(i)
        for f in self.logs:
            if f:
                f.close()
        self.logs = [None] * self.size
        if self.base_dir and not os.environ.get("SLUICE_KEEP_ETCD"):
            shutil.rmtree(self.base_dir, ignore_errors=True)
        _live.discard(self)

    # ---- addresses

    @property
    def endpoints(self):
        return [self.endpoint(i) for i in range(self.size)]

    def endpoint(self, i):
        return "http://127.0.0.1:%d" % self.client_ports[i]

    def endpoints_arg(self):
        """The --etcd value: every endpoint, comma-separated."""
        return ",".join(self.endpoints)

    # ---- member control

    def _initial_cluster(self):
        return ",".join("%s=http://127.0.0.1:%d" % (n, p)
                        for n, p in zip(self.names, self.peer_ports))

    def _spawn(self, i):
        client = "http://127.0.0.1:%d" % self.client_ports[i]
        peer = "http://127.0.0.1:%d" % self.peer_ports[i]
        argv = [self.binary,
                "--name=" + self.names[i],
                "--data-dir=" + os.path.join(self.base_dir, self.names[i]),
                "--listen-client-urls=" + client,
                "--advertise-client-urls=" + client,
                "--listen-peer-urls=" + peer,
                "--initial-advertise-peer-urls=" + peer,
                "--initial-cluster=" + self._initial_cluster(),
                "--initial-cluster-state=new",
                "--initial-cluster-token=" + self.token,
                "--heartbeat-interval=%d" % self.heartbeat_ms,
                "--election-timeout=%d" % self.election_ms,
                "--logger=zap", "--log-outputs=stderr", "--log-level=warn"]
        if self.progress_notify_interval_ms:
            argv.append("--experimental-watch-progress-notify-interval=%dms"
                        % self.progress_notify_interval_ms)
        if self.logs[i] is None:
            self.logs[i] = open(os.path.join(self.base_dir, self.names[i] + ".log"), "ab")
        self.procs[i] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.logs[i],
                                         stderr=subprocess.STDOUT)

    def running(self, i):
        p = self.procs[i]
        return p is not None and p.poll() is None

    def kill(self, i):
        """SIGKILL member i (a dead machine) and reap it."""
        p = self.procs[i]
        if p is None:
            return
        if p.poll() is None:
            try:
                os.kill(p.pid, signal.SIGCONT)  # a paused member dies too
                p.kill()
            except ProcessLookupError:
                pass
        p.wait()
        self.procs[i] = None

    def stop(self, i, timeout=10.0):
        """SIGTERM member i and wait for it to exit."""
        p = self.procs[i]
        if p is None:
            return
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs[i] = None

    def restart(self, i, wait=True):
        """Starts member i again on its data directory (killing it first if it runs)."""
        self.kill(i)
        self._spawn(i)
        if wait:
            self.wait_healthy(i)

    def pause(self, i):
        """SIGSTOP member i: it holds its sockets and answers nothing."""
        os.kill(self.procs[i].pid, signal.SIGSTOP)

    def resume(self, i):
        os.kill(self.procs[i].pid, signal.SIGCONT)

    def wait_healthy(self, i, timeout=None):
        """Until member i's /health says true (it has a leader)."""
        deadline = time.monotonic() + (timeout or self.start_timeout)
        last = "no answer"
        while time.monotonic() < deadline:
            p = self.procs[i]
            if p is not None and p.poll() is not None:
                raise EtcdError("etcd member %s exited (%s): %s"
                                % (self.names[i], p.returncode, self.log_tail(i)))
            try:
                with urllib.request.urlopen(self.endpoint(i) + "/health", timeout=1) as r:
                    body = r.read().decode()
                    if json.loads(body).get("health") == "true":
                        return
                    last = body
            except (OSError, ValueError) as e:
                last = str(e)
            time.sleep(0.05)
        raise EtcdError("etcd member %s not healthy (%s): %s"
                        % (self.names[i], last, self.log_tail(i)))

    def log_tail(self, i, n=3000):
        if not self.base_dir:
            return ""
        try:
            with open(os.path.join(self.base_dir, self.names[i] + ".log"), "rb") as f:
                return f.read()[-n:].decode(errors="replace")
        except OSError:
            return ""

    # ---- a small client for test assertions (tries the running members in turn)

    def call(self, path, body, member=None):
        """POSTs JSON to /v3/<path> of a running member; the decoded answer. An etcd error
        object raises EtcdError."""
        order = [member] if member is not None else [i for i in range(self.size) if self.running(i)]
        data = json.dumps(body).encode()
        last = None
        for i in order:
            req = urllib.request.Request(self.endpoint(i) + "/v3/" + path, data=data,
                                         headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=5) as r:
                    answer = json.loads(r.read())
            except urllib.error.HTTPError as e:
                answer = json.loads(e.read() or b"{}")
                if e.code >= 500:
                    last = EtcdError(answer.get("error") or str(e))
                    continue
            except OSError as e:
                last = EtcdError("%s: %s" % (self.endpoint(i), e))
                continue
            if "error" in answer:
                raise EtcdError(answer["error"])
            return answer.get("result", answer)
        raise last or EtcdError("no running etcd member")

    def put(self, key, value, lease=0):
        body = {"key": b64(key), "value": b64(value)}
        if lease:
            body["lease"] = str(lease)
        return int(self.call("kv/put", body)["header"]["revision"])

    def get(self, key):
        """The value (bytes) of `key`, or None."""
        kvs = self.call("kv/range", {"key": b64(key)}).get("kvs", [])
        return unb64(kvs[0].get("value")) if kvs else None

    def get_prefix(self, prefix):
        """{key bytes: value bytes} of every key under `prefix`."""
        r = self.call("kv/range", {"key": b64(prefix), "range_end": b64(prefix_end(prefix))})
        return {unb64(kv["key"]): unb64(kv.get("value")) for kv in r.get("kvs", [])}

    def delete(self, key):
        return int(self.call("kv/deleterange", {"key": b64(key)}).get("deleted", "0"))

    def grant(self, ttl_s):
        return int(self.call("lease/grant", {"TTL": str(ttl_s)})["ID"])

    def revision(self):
        return int(self.call("kv/range", {"key": b64("\0")})["header"]["revision"])

    def status(self, i):
        """/v3/maintenance/status of member i (leader, raftTerm, ...)."""
        return self.call("maintenance/status", {}, member=i)

    def leader(self):
        """The index of the member that leads, or None."""
        for i in range(self.size):
            if not self.running(i):
                continue
            try:
                st = self.status(i)
            except EtcdError:
                continue
            if st.get("leader") and st.get("leader") == st["header"].get("member_id"):
                return i
        return None


def main_with_etcd(name, run, prefix, missing=None):
    """A test's main: SKIP without etcd, FAIL with `missing` (what else is missing, or
    None), else run(sluice, etcd, tmp) against a fresh etcd and a temporary directory;
    PASS, or FAIL with the traceback. Returns the exit status."""
    import sys
    import traceback
    sluice = sys.argv[1]
    why = unavailable()
    if why:
        print(f"SKIP: {why}")
        return 0
    if missing:
        print(f"FAIL: {missing}")
        return 1
    tmp = tempfile.mkdtemp(prefix=prefix)
    etcd = EtcdCluster().start()
    try:
        run(sluice, etcd, tmp)
        print(f"PASS: {name}")
        return 0
    except Exception as e:  # the verdict: any exception fails it
        traceback.print_exc()
        print(f"FAIL: {name}: {e}")
        return 1
    finally:
        etcd.close()
        if os.environ.get("SLUICE_KEEP_TMP"):
            print(f"kept the test's files in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
