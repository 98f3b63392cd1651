#!/usr/bin/python3
"""TLS on the query server and the HTTP port (docs/design/0019-security.md, phase C), with
the tls: section's certificate (made here with the openssl CLI: tls_listeners_test's CA,
server and client certificates).

- query.tls: psql with sslmode=require and verify-full (the CA, the name 127.0.0.1) runs
  SQL over TLS (\\conninfo says SSL); sslmode=disable still works; verify-full against
  another CA is refused; node's `pg` with ssl { ca } queries;
- bytes sent after the SSLRequest before the handshake are refused (CVE-2021-23214);
- query.require_tls: a session without TLS is refused with Postgres's message (28000);
- http.tls: curl over HTTPS reads /healthz and /metrics; plain HTTP on it fails; 1,000
  half-open connections (silent, a cut ClientHello, a cut request head) do not keep curl
  waiting and are all closed;
- SIGHUP reloads the certificate for the HTTP port and the query server alike (openssl
  s_client, with -starttls postgres for the latter);
- refused at start: query.tls or http.tls without a tls: section, query.require_tls
  without query.tls.

usage: /usr/bin/python3 tls_query_http_test.py path/to/sluice
"""

import os
import re
import resource
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from sluice_broker import FAST_GROUPS, Broker, TestFailure, check, wait_until  # noqa: E402
from tls_listeners_test import count_closed, make_certs, openssl  # noqa: E402


def config(d, require=False):
    return FAST_GROUPS + f"""tls:
  cert_file: {d}/server.pem
  key_file: {d}/server.key
query:
  tls: true
  require_tls: {"true" if require else "false"}
  users: ["alice:alice-secret"]
http:
  tls: true
"""


def ports(broker):
    def banner():
        with open(broker.out_path) as f:
            text = f.read()
        return text if "Postgres wire protocol on" in text else None
    text = wait_until(banner, 30, "the query server's banner line")
    pg = re.search(r"^sluice: Postgres wire protocol on 127\.0\.0\.1:(\d+)", text, re.M)
    http = re.search(r"^sluice: metrics on (\w+)://127\.0\.0\.1:(\d+)/metrics", text, re.M)
    check(pg is not None and http is not None, f"banner: {text}")
    check(http.group(1) == "https", f"the metrics line says {http.group(1)}, not https")
    return int(pg.group(1)), int(http.group(2))


def psql(port, sslmode, sql, d, rootcert="ca.pem"):
    conn = (f"host=127.0.0.1 port={port} user=alice dbname=alice sslmode={sslmode} "
            f"sslrootcert={d}/{rootcert}")
    env = dict(os.environ, PGPASSWORD="alice-secret", PGCONNECT_TIMEOUT="10")
    return subprocess.run(["psql", conn, "-X", "-A", "-t", "-c", sql], capture_output=True,
                          env=env, timeout=60)


def served_subject(port, d, starttls=None):
    args = ["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-CAfile", f"{d}/ca.pem"]
    if starttls:
        args += ["-starttls", starttls]
    p = subprocess.run(args, input=b"", capture_output=True, timeout=30)
    m = re.search(rb"^subject=(.*)$", p.stdout, re.M)
    check(m is not None, f"s_client on {port}: {p.stdout.decode(errors='replace')[-500:]}")
    return m.group(1).decode().strip()


def curl(url, d, *extra):
    return subprocess.run(["curl", "-sS", "--max-time", "20", "--cacert", f"{d}/ca.pem", *extra, url],
                          capture_output=True, timeout=60)


def startup_packet(user):
    body = struct.pack(">i", 196608) + b"user\0" + user.encode() + b"\0database\0" + \
        user.encode() + b"\0\0"
    return struct.pack(">i", len(body) + 4) + body


def offered(broker, d):
    pg, http = ports(broker)
    # psql over TLS, checked by its own \conninfo, and the same SQL answered.
    for mode in ("require", "verify-full"):
        p = psql(pg, mode, "SELECT 40 + 2", d)
        check(p.returncode == 0 and p.stdout.strip() == b"42",
              f"psql sslmode={mode}: {p.stdout!r} {p.stderr.decode(errors='replace')}")
        p = psql(pg, mode, "\\conninfo", d)
        check(b"SSL connection (protocol: TLSv1.3" in p.stdout,
              f"psql sslmode={mode} \\conninfo: {p.stdout.decode(errors='replace')}")
    p = psql(pg, "disable", "SELECT 'clear'", d)
    check(p.returncode == 0 and p.stdout.strip() == b"clear",
          f"psql sslmode=disable: {p.stderr.decode(errors='replace')}")
    p = psql(pg, "verify-full", "SELECT 1", d, rootcert="other-ca.pem")
    check(p.returncode != 0 and b"certificate verify failed" in p.stderr,
          f"psql verify-full against another CA: rc {p.returncode}, {p.stderr.decode(errors='replace')}")

    # node's pg over TLS.
    node = shutil.which("node") or shutil.which("nodejs")
    check(node is not None, "node is missing (scripts/setup.sh installs nodejs)")
    script = f"""
const {{ Client }} = require('pg')
const fs = require('fs')
const c = new Client({{ host: '127.0.0.1', port: {pg}, user: 'alice', password: 'alice-secret',
  database: 'alice', ssl: {{ ca: fs.readFileSync('{d}/ca.pem', 'utf8') }} }})
c.connect().then(() => c.query("SELECT 'over tls' AS v")).then(r => {{
  console.log(r.rows[0].v, c.connection.stream.getProtocol()); return c.end() }})
  .catch(e => {{ console.log('FAIL', e.message); process.exit(1) }})
"""
    p = subprocess.run([node, "-e", script], capture_output=True, timeout=60,
                       cwd=os.path.join(HERE, "..", ".."))
    check(p.returncode == 0 and p.stdout.startswith(b"over tls TLSv1."),
          f"pg over TLS: {p.stdout!r} {p.stderr.decode(errors='replace')[-500:]}")

    # Plaintext bytes after the SSLRequest, before the handshake: refused, not read as TLS.
    with socket.create_connection(("127.0.0.1", pg), timeout=10) as s:
        s.sendall(struct.pack(">ii", 8, 80877103) + startup_packet("alice"))
        answer = s.recv(4096)
    check(answer[:1] == b"E" and b"received unencrypted data after SSL request" in answer,
          f"SSLRequest followed by plaintext: {answer!r}")

    # HTTPS.
    for path, want in (("/healthz", b"ok"), ("/metrics", b"# TYPE")):
        p = curl(f"https://127.0.0.1:{http}{path}", d)
        check(p.returncode == 0 and want in p.stdout,
              f"curl https {path}: {p.stdout[:200]!r} {p.stderr.decode(errors='replace')}")
    p = curl(f"http://127.0.0.1:{http}/healthz", d)
    check(p.returncode != 0 or b"ok" not in p.stdout, f"plain HTTP on the HTTPS port: {p.stdout!r}")
    p = curl(f"https://127.0.0.1:{http}/healthz", d, "--cacert", f"{d}/other-ca.pem")
    check(p.returncode != 0, "curl trusting another CA was answered")

    # SIGHUP: both ports serve the renewed certificate.
    check(served_subject(http, d) == "CN = 127.0.0.1", "the HTTP port's first certificate")
    check(served_subject(pg, d, "postgres") == "CN = 127.0.0.1", "the query server's first certificate")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1/O=renewed",
            "-keyout", "renewed.key", "-out", "renewed.csr", cwd=d)
    openssl("x509", "-req", "-in", "renewed.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-out", "renewed.pem", "-extfile", "san.ext", cwd=d)
    os.chmod(os.path.join(d, "renewed.key"), 0o600)
    os.replace(os.path.join(d, "renewed.pem"), os.path.join(d, "server.pem"))
    os.replace(os.path.join(d, "renewed.key"), os.path.join(d, "server.key"))
    broker.proc.send_signal(signal.SIGHUP)

    def reloaded():
        with open(broker.out_path) as f:
            return "TLS certificate and key reloaded" in f.read()
    wait_until(reloaded, 20, "the reload line")
    check(served_subject(http, d) == "CN = 127.0.0.1, O = renewed", "the HTTP port after SIGHUP")
    check(served_subject(pg, d, "postgres") == "CN = 127.0.0.1, O = renewed",
          "the query server after SIGHUP")
    p = psql(pg, "verify-full", "SELECT 'renewed'", d)
    check(p.returncode == 0 and p.stdout.strip() == b"renewed",
          f"psql after the reload: {p.stderr.decode(errors='replace')}")
    p = curl(f"https://127.0.0.1:{http}/healthz", d)
    check(p.returncode == 0 and p.stdout.startswith(b"ok"),
          f"curl after the reload: rc {p.returncode}, {p.stdout!r} {p.stderr!r}")


def half_open(broker, d):
    """1,000 connections to the HTTPS port that never ask anything: silent ones, ones that
    stop inside the ClientHello, and ones that finish the handshake and stop inside the
    request's head. curl is answered meanwhile, and every one of them is closed after the
    front door's 10 s (0019, "the HTTP port's front door")."""
    _, http = ports(broker)
    ctx = ssl.create_default_context(cafile=f"{d}/ca.pem")
    socks = []
    for i in range(1000):
        s = socket.create_connection(("127.0.0.1", http), timeout=10)
        if i % 5 == 1:
            s.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")  # a ClientHello's start
        elif i % 5 == 2:
            s = ctx.wrap_socket(s, server_hostname="127.0.0.1")
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # no blank line
        socks.append(s)
    for path, want in (("/healthz", b"ok"), ("/metrics", b"# TYPE")):
        p = curl(f"https://127.0.0.1:{http}{path}", d)
        check(p.returncode == 0 and want in p.stdout,
              f"curl https {path} beside 1,000 half-open connections: rc {p.returncode} "
              f"{p.stderr.decode(errors='replace')}")
    closed = count_closed(socks, 30)
    check(closed == 1000, f"{closed} of 1,000 half-open connections closed by the HTTP port")
    # And a plain, well-formed request in two pieces still goes through.
    with ctx.wrap_socket(socket.create_connection(("127.0.0.1", http), timeout=10),
                         server_hostname="127.0.0.1") as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        time.sleep(0.2)
        s.sendall(b"Connection: close\r\n\r\n")
        answer = b""
        while chunk := s.recv(4096):
            answer += chunk
    check(answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"ok\n"),
          f"a request sent in two pieces: {answer!r}")


def required(broker, d):
    pg, _ = ports(broker)
    p = psql(pg, "disable", "SELECT 1", d)
    check(p.returncode != 0 and b'no pg_hba.conf entry for host "127.0.0.1", user "alice", '
          b'database "alice", no encryption' in p.stderr,
          f"psql sslmode=disable with require_tls: {p.stderr.decode(errors='replace')}")
    p = psql(pg, "prefer", "SELECT 'encrypted'", d)
    check(p.returncode == 0 and p.stdout.strip() == b"encrypted",
          f"psql sslmode=prefer with require_tls: {p.stderr.decode(errors='replace')}")


def run(sluice, d, cfg, body):
    broker = Broker(sluice, cfg)
    try:
        broker.start()
        body(broker, d)
        rc = broker.stop()
        check(rc == 0, f"sluice serve exited {rc} after SIGTERM")
    except BaseException:
        print(broker.logs(), file=sys.stderr)
        raise
    finally:
        broker.cleanup()


def refused(sluice, d):
    tls = f"tls:\n  cert_file: {d}/server.pem\n  key_file: {d}/server.key\n"
    for cfg, why in (("query:\n  tls: true\n", "query.tls (set in"),
                     ("http:\n  tls: true\n", "http.tls (set in"),
                     (tls + "query:\n  require_tls: true\n", "but query.tls is off")):
        broker = Broker(sluice, FAST_GROUPS + cfg)
        try:
            try:
                broker.start(timeout=20)
                raise TestFailure(f"started with {cfg!r}")
            except TestFailure as e:
                check(why in str(e), f"refusal of {cfg!r}: want {why!r} in {e}")
        finally:
            broker.cleanup()


def main():
    sluice = os.path.abspath(sys.argv[1])
    d = tempfile.mkdtemp(prefix="sluice-tls-query-")
    try:
        make_certs(d)
        run(sluice, d, config(d), offered)
        print("PASS: query.tls (psql require/verify-full, pg) and http.tls (curl); SIGHUP reload")
        # 1,000 half-open connections here and in sluice serve (which inherits the limit).
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and soft < 4096:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))
        run(sluice, d, config(d), half_open)
        print("PASS: 1,000 half-open HTTPS connections: curl served, every one closed")
        run(sluice, d, config(d, require=True), required)
        print("PASS: query.require_tls refuses plaintext sessions with Postgres's message")
        refused(sluice, d)
        print("PASS: bad TLS settings of the query server and HTTP port are refused")
    except TestFailure as e:
        print(f"FAIL: {e}")
        return 1
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
