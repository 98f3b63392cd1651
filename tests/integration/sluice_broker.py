"""`sluice serve` for Python integration tests, and the few raw Kafka requests no
installed client makes.

Broker: starts `sluice serve` on 127.0.0.1 and a port the kernel picks (it prints the
port once it listens), with a data directory and an optional YAML config; stops it
with SIGTERM (stop() returns the exit status) or SIGKILL (kill()); the same data
directory can be served again (start() after a stop or kill).

raw_metadata(): Metadata v12, which carries topic ids (no client here shows them).
RawConnection: one TCP connection sending requests encoded by kafka-python's protocol
classes, for tests that must control exactly which request is in flight.

Python 3.11 stdlib plus Debian's python3-kafka; run with /usr/bin/python3.
"""

import io
import os
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
import uuid

# Kafka's 3 s initial rebalance delay makes every new group wait; tests need none.
FAST_GROUPS = "groups:\n  initial_rebalance_delay: 0\n"


class TestFailure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise TestFailure(message)


def wait_until(predicate, timeout, what, interval=0.02):
    """Polls predicate() until it returns a true value (returned) or fails at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TestFailure(f"{what}: not within {timeout} s")
        time.sleep(interval)


class Broker:
    """One `sluice serve` process at a time over one data directory (a temporary one
    unless given; removed by cleanup() only when it made it)."""

    def __init__(self, sluice, config=FAST_GROUPS, data_dir=None, extra_args=(),
                 kafka_addr="127.0.0.1:0", schema_registry="off"):
        self.sluice = sluice
        # --schema-registry-addr: off, or 127.0.0.1:0 (its URL is then self.registry_url).
        self.schema_registry = schema_registry
        self.registry_url = None
        self.kafka_addr = kafka_addr  # None: the config's kafka.listeners say where
        self.config = config
        self.extra_args = list(extra_args)
        self.tmp = tempfile.mkdtemp(prefix="sluice-it-")
        self.data_dir = data_dir or os.path.join(self.tmp, "data")
        self.proc = None
        self.bootstrap = None
        self.port = None
        self.runs = 0

    def start(self, timeout=30, extra_args=None):
        check(self.proc is None, "broker already running")
        self.runs += 1
        self.out_path = os.path.join(self.tmp, f"out.{self.runs}")
        self.err_path = os.path.join(self.tmp, f"err.{self.runs}")
        args = [self.sluice, "serve", "--data-dir", self.data_dir,
                "--shards", "2", "--http-addr", "127.0.0.1:0", "--pg-addr", "127.0.0.1:0",
                "--schema-registry-addr", self.schema_registry]
        if self.kafka_addr is not None:
            args += ["--kafka-addr", self.kafka_addr]
        if self.config:
            config_path = os.path.join(self.tmp, "sluice.yaml")
            with open(config_path, "w") as f:
                f.write(self.config)
            args += ["--config", config_path]
        args += self.extra_args + list(extra_args or [])
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(args, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        pattern = re.compile(r"^sluice: serving Kafka on 127\.0\.0\.1:(\d+) ", re.M)

        def listening():
            with open(self.out_path) as f:
                m = pattern.search(f.read())
            if m:
                return m
            if self.proc.poll() is not None:
                self.proc = None
                raise TestFailure("sluice serve exited before listening:\n" + self.logs())
            return None

        m = wait_until(listening, timeout, "sluice serve listening")
        self.port = int(m.group(1))
        self.bootstrap = f"127.0.0.1:{self.port}"
        if self.schema_registry != "off":
            registry = re.compile(r"Schema Registry on (https?://\S+)")

            def registry_up():
                if self.proc.poll() is not None:
                    raise TestFailure("sluice serve exited before its registry was up:\n" +
                                      self.logs())
                with open(self.out_path) as f:
                    return registry.search(f.read())

            self.registry_url = wait_until(registry_up, timeout, "schema registry").group(1)
        return self.bootstrap

    def stop(self, timeout=60):
        """SIGTERM; the exit status (None after a SIGKILL when it did not exit in time)."""
        self.terminate()
        return self.wait(timeout)

    def terminate(self):
        """Sends SIGTERM without waiting for the exit."""
        check(self.proc is not None, "broker not running")
        self.proc.send_signal(signal.SIGTERM)

    def wait(self, timeout=60):
        """Waits for the exit: its status, or None after a SIGKILL when it did not exit
        in time."""
        check(self.proc is not None, "broker not running")
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            rc = None
        self.proc = None
        return rc

    def kill(self):
        check(self.proc is not None, "broker not running")
        self.proc.kill()
        self.proc.wait()
        self.proc = None

    def logs(self, lines=60):
        text = []
        for path in sorted(p for p in os.listdir(self.tmp) if p.startswith(("out.", "err."))):
            with open(os.path.join(self.tmp, path), errors="replace") as f:
                tail = f.read().splitlines()[-lines:]
            text.append(f"--- sluice serve {path}:\n" + "\n".join(tail))
        return "\n".join(text)

    def cleanup(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
        shutil.rmtree(self.tmp, ignore_errors=True)


def kcat(bootstrap, config, args, stdin=None, timeout=60):
    """Runs kcat against `bootstrap` with librdkafka properties `config` (-X) and `args`:
    the CompletedProcess, output captured."""
    cmd = ["kcat", "-b", bootstrap]
    for k, v in config.items():
        cmd += ["-X", f"{k}={v}"]
    return subprocess.run(cmd + args, stdin=stdin, capture_output=True, timeout=timeout)


def run_test(name, sluice, body, config=FAST_GROUPS, kafka_addr="127.0.0.1:0"):
    """Runs body(broker) against a fresh broker, then expects SIGTERM to stop it with
    exit 0. Prints PASS or FAIL (with the broker's logs) and returns the exit status."""
    broker = Broker(sluice, config, kafka_addr=kafka_addr)
    try:
        broker.start()
        body(broker)
        rc = broker.stop()
        check(rc == 0, f"sluice serve exited {rc} after SIGTERM")
        print(f"PASS: {name}")
        return 0
    except Exception as e:  # the test's verdict: any exception fails it
        import traceback
        traceback.print_exc()
        print(f"FAIL: {name}: {e}")
        print(broker.logs())
        return 1
    finally:
        broker.cleanup()


# --- raw Kafka requests -------------------------------------------------------------


class _Reader:
    def __init__(self, data):
        self.data = data
        self.pos = 0

    def take(self, n):
        check(self.pos + n <= len(self.data), "truncated response")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def int8(self):
        return struct.unpack(">b", self.take(1))[0]

    def int16(self):
        return struct.unpack(">h", self.take(2))[0]

    def int32(self):
        return struct.unpack(">i", self.take(4))[0]

    def uvarint(self):
        shift = value = 0
        while True:
            b = self.take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def compact_string(self):
        n = self.uvarint()
        return None if n == 0 else self.take(n - 1).decode()

    def compact_array(self, item):
        n = self.uvarint()
        return None if n == 0 else [item() for _ in range(n - 1)]

    def tagged_fields(self):
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


# Encoders of flexible-version fields (compact strings, bytes and arrays).
def uvarint(n):
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def cstr(s):
    b = s.encode()
    return uvarint(len(b) + 1) + b


def cbytes(b):
    return uvarint(len(b) + 1) + b


def carr(items):
    return uvarint(len(items) + 1) + b"".join(items)


def _recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise TestFailure(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def _frame(api_key, version, correlation_id, body, flexible):
    client_id = b"sluice-it-raw"
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    if flexible:
        header += b"\x00"  # no tagged fields
    msg = header + body
    return struct.pack(">i", len(msg)) + msg


def raw_metadata(bootstrap, timeout=20):
    """Metadata v12 for every topic: {name: {"id": uuid.UUID, "partitions": {index:
    (error_code, leader, leader_epoch)}, "error": code}} and the broker list."""
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        # topics: null (all); allow_auto_topic_creation false;
        # include_topic_authorized_operations false; no tagged fields.
        body = b"\x00" + b"\x00" + b"\x00" + b"\x00"
        sock.sendall(_frame(3, 12, 7, body, flexible=True))
        size = struct.unpack(">i", _recv_exact(sock, 4))[0]
        r = _Reader(_recv_exact(sock, size))
    check(r.int32() == 7, "correlation id")
    r.tagged_fields()  # response header v1
    r.int32()  # throttle_time_ms

    def broker():
        b = (r.int32(), r.compact_string(), r.int32(), r.compact_string())
        r.tagged_fields()
        return b

    brokers = r.compact_array(broker)
    r.compact_string()  # cluster id
    r.int32()  # controller id

    def partition():
        error, index, leader, epoch = r.int16(), r.int32(), r.int32(), r.int32()
        for _ in range(3):  # replicas, isr, offline replicas
            r.compact_array(r.int32)
        r.tagged_fields()
        return index, (error, leader, epoch)

    def topic():
        error = r.int16()
        name = r.compact_string()
        topic_id = uuid.UUID(bytes=r.take(16))
        r.int8()  # is_internal
        partitions = dict(r.compact_array(partition) or [])
        r.int32()  # authorized operations
        r.tagged_fields()
        return name, {"error": error, "id": topic_id, "partitions": partitions}

    topics = dict(r.compact_array(topic) or [])
    r.tagged_fields()
    return {"brokers": brokers, "topics": topics}


class RawConnection:
    """A connection that sends requests made with kafka-python's protocol classes
    (kafka.protocol.*: non-flexible versions) and reads their responses."""

    def __init__(self, bootstrap, timeout=60):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation_id = 0

    def send(self, request):
        self.correlation_id += 1
        self.sock.sendall(_frame(request.API_KEY, request.API_VERSION, self.correlation_id,
                                 request.encode(), flexible=False))
        return self.correlation_id

    def receive(self, request, correlation_id):
        size = struct.unpack(">i", _recv_exact(self.sock, 4))[0]
        data = _recv_exact(self.sock, size)
        check(struct.unpack(">i", data[:4])[0] == correlation_id, "correlation id")
        return request.RESPONSE_TYPE.decode(io.BytesIO(data[4:]))

    def call(self, request):
        return self.receive(request, self.send(request))

    def readable(self):
        """Whether a response (or the end of the connection) is waiting to be read."""
        return bool(select.select([self.sock], [], [], 0)[0])

    def local_port(self):
        return self.sock.getsockname()[1]

    def close(self):
        self.sock.close()


def tcp_queues(local_port, remote_port):
    """(tx_queue, rx_queue) of the IPv4 loopback socket local_port -> remote_port, from
    /proc/net/tcp, or None when there is none."""
    want = (f"0100007F:{local_port:04X}", f"0100007F:{remote_port:04X}")
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            if (fields[1], fields[2]) == want:
                tx, rx = fields[4].split(":")
                return int(tx, 16), int(rx, 16)
    return None


def wait_read_by_broker(conn, broker_port, timeout=30):
    """Waits until every byte sent on `conn` reached the broker's socket (acknowledged:
    our send queue is empty) and the broker read it (its receive queue is empty)."""
    local = conn.local_port()
    wait_until(lambda: (tcp_queues(local, broker_port) or (1, 0))[0] == 0, timeout,
               "the request acknowledged by the broker's kernel")
    wait_until(lambda: (tcp_queues(broker_port, local) or (0, 1))[1] == 0, timeout,
               "the request read by the broker")
