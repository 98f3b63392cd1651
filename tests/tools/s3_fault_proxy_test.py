#!/usr/bin/python3
"""Tests of s3_fault_proxy.py against a real S3 server: Ceph's radosgw on loopback, started
by tests/integration/s3/with-rgw.sh (which makes the bucket SLUICE_S3_BUCKET and exports
AWS_* for it). The proxy runs as a program (its JSON line, its control port, stdin EOF).

Requests go through the proxy signed by botocore (S3SigV4Auth) over http.client, one
connection reused across requests where a test says so, and are checked against the store
itself (read directly, not through the proxy):
  - pass: objects put, read (byte for byte), ranged, listed, deleted; multipart; botocore's
    own client (Expect: 100-continue); keep-alive across many requests; Host as sent;
  - err500 / err503: the S3 XML <Error> with InternalError / SlowDown, the store untouched,
    the connection still usable; err500_after: the store did it;
  - reset_before (the store untouched), reset_after (the store did it, no reply), cut_body
    (headers and half the body, then a reset; for an answer without a body, half its head);
  - delay: the reply comes no sooner than the delay;
  - the seeded draws: the same seed gives the same faults in the same order, a rate gives
    about that fraction, the counters match what the client saw;
  - filters: methods and path_contains;
  - no_conditional: radosgw refuses a second If-None-Match create (412) directly and
    through a passing proxy; in no_conditional mode the second create succeeds and
    overwrites, re-signed;
  - /stats, /log, bad settings refused, and the exit on stdin EOF.

usage: with-rgw.sh BUCKET /usr/bin/python3 s3_fault_proxy_test.py
"""

import hashlib
import http.client
import io
import json
import os
import socket
import subprocess
import sys
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request
import uuid
import xml.etree.ElementTree as ET

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
import botocore.session

HERE = os.path.dirname(os.path.abspath(__file__))
PROXY = os.path.join(HERE, "s3_fault_proxy.py")


class TestFailure(Exception):
    pass


def check(cond, message):
    if not cond:
        raise TestFailure(message)


def env(name):
    v = os.environ.get(name)
    if not v:
        raise TestFailure("%s is not set: run under tests/integration/s3/with-rgw.sh" % name)
    return v


class ProxyProcess:
    def __init__(self, target, seed=None):
        args = ["/usr/bin/python3", PROXY, "--target", target, "--exit-on-stdin-eof"]
        if seed is not None:
            args += ["--seed", str(seed)]
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        line = self.proc.stdout.readline()
        check(line, "the proxy printed nothing")
        info = json.loads(line)
        self.port, self.control_port, self.seed = info["port"], info["control_port"], info["seed"]
        self.url = "http://127.0.0.1:%d" % self.port

    def control(self, path, **query):
        url = "http://127.0.0.1:%d%s" % (self.control_port, path)
        if query:
            url += "?" + urllib.parse.urlencode(query)
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.loads(r.read())

    def faults(self, **query):
        return self.control("/faults", **query)

    def stats(self):
        return self.control("/stats")

    def stop(self):
        """Closes its stdin: it must exit by itself."""
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None


class S3:
    """SigV4-signed requests to one endpoint over http.client; `keep` reuses one
    connection across requests."""

    def __init__(self, endpoint, bucket, keep=False):
        u = urllib.parse.urlparse(endpoint)
        self.host, self.port = u.hostname, u.port
        self.bucket = bucket
        self.creds = Credentials(env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY"))
        self.region = os.environ.get("AWS_REGION", "us-east-1")
        self.keep = keep
        self.conn = None

    def request(self, method, key="", body=b"", headers=None, query="", timeout=30):
        """(status, {lowercase header: value}, body); raises on a broken connection."""
        target = "/%s" % self.bucket
        if key:
            target += "/" + urllib.parse.quote(key, safe="/-_.~")
        if query:
            target += "?" + query
        host = "%s:%d" % (self.host, self.port)
        req = AWSRequest(method=method, url="http://%s%s" % (host, target), data=body)
        for k, v in (headers or {}).items():
            req.headers[k] = v
        S3SigV4Auth(self.creds, "s3", self.region).add_auth(req)
        send = {k: v for k, v in req.headers.items()}
        if self.conn is None:
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            self.conn.request(method, target, body=body if body or method in ("PUT", "POST") else None,
                              headers=send)
            resp = self.conn.getresponse()
            data = resp.read()
            out = (resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)
        except BaseException:
            self.close()
            raise
        if not self.keep or out[1].get("connection", "").lower() == "close":
            self.close()
        return out

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def s3_error(body):
    root = ET.fromstring(body)
    check(root.tag == "Error", "not an <Error>: %r" % body[:200])
    return root.findtext("Code")


def botocore_client(endpoint):
    return botocore.session.get_session().create_client(
        "s3", endpoint_url=endpoint, region_name=os.environ.get("AWS_REGION", "us-east-1"),
        aws_access_key_id=env("AWS_ACCESS_KEY_ID"),
        aws_secret_access_key=env("AWS_SECRET_ACCESS_KEY"),
        config=Config(s3={"addressing_style": "path"}, retries={"total_max_attempts": 1}))


def broken(fn):
    """Whether fn() failed with a broken connection (the message) or returned (None)."""
    try:
        fn()
    except TestFailure:
        raise
    except Exception as e:  # http.client's, socket's, botocore's and urllib3's errors
        return "%s: %s" % (type(e).__name__, e)
    return None


def test_pass(proxy, direct, via, prefix):
    bucket = direct.bucket
    body = os.urandom(300_000)
    st, h, _ = via.request("PUT", prefix + "a b/obj+1", body)
    check(st == 200, "PUT through the proxy: %d" % st)
    st, _, got = direct.request("GET", prefix + "a b/obj+1")
    check(st == 200 and got == body, "the store holds what was put through the proxy")
    st, h, got = via.request("GET", prefix + "a b/obj+1")
    check(st == 200 and got == body, "GET through the proxy, byte for byte")
    check(h.get("etag", "").strip('"') == hashlib.md5(body).hexdigest(), "the store's ETag")
    st, _, got = via.request("GET", prefix + "a b/obj+1", headers={"Range": "bytes=10-19"})
    check(st == 206 and got == body[10:20], "a ranged GET: %d %r" % (st, got))
    st, h, got = via.request("HEAD", prefix + "a b/obj+1")
    check(st == 200 and got == b"" and int(h["content-length"]) == len(body), "HEAD")
    st, _, got = via.request("GET", prefix + "missing")
    check(st == 404 and s3_error(got) == "NoSuchKey", "404 NoSuchKey through the proxy")
    # Keep-alive: many requests on one connection.
    keep = S3(proxy.url, bucket, keep=True)
    for i in range(30):
        st, _, _ = keep.request("PUT", prefix + "k/%02d" % i, b"x%d" % i)
        check(st == 200, "keep-alive PUT %d: %d" % (i, st))
    st, _, got = keep.request("GET", "", query="list-type=2&prefix=" +
                              urllib.parse.quote(prefix + "k/", safe=""))
    check(st == 200 and got.count(b"<Key>") == 30, "list through the proxy")
    keep.close()
    # botocore's own client: Expect: 100-continue on PutObject, multipart.
    client = botocore_client(proxy.url)
    client.put_object(Bucket=bucket, Key=prefix + "boto", Body=b"hello")
    check(client.get_object(Bucket=bucket, Key=prefix + "boto")["Body"].read() == b"hello",
          "botocore round trip")
    part = os.urandom(5 << 20)
    up = client.create_multipart_upload(Bucket=bucket, Key=prefix + "multi")
    etags = []
    for n, data in ((1, part), (2, b"tail")):
        r = client.upload_part(Bucket=bucket, Key=prefix + "multi", PartNumber=n,
                               UploadId=up["UploadId"], Body=data)
        etags.append({"PartNumber": n, "ETag": r["ETag"]})
    client.complete_multipart_upload(Bucket=bucket, Key=prefix + "multi", UploadId=up["UploadId"],
                                     MultipartUpload={"Parts": etags})
    st, _, got = direct.request("GET", prefix + "multi")
    check(st == 200 and got == part + b"tail", "multipart through the proxy")
    client.put_object(Bucket=bucket, Key=prefix + "boto-file", Body=io.BytesIO(b"x" * 5000))
    check(direct.request("GET", prefix + "boto-file")[2] == b"x" * 5000,
          "botocore with a file body (Expect: 100-continue)")
    # Expect: 100-continue by hand: the proxy answers 100 before the body is sent.
    body = b"continued" * 100
    target = "/%s/%sexpect" % (bucket, prefix)
    req = AWSRequest(method="PUT", url="%s%s" % (proxy.url, target), data=body,
                     headers={"Expect": "100-continue"})
    S3SigV4Auth(direct.creds, "s3", direct.region).add_auth(req)
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=30)
    sock.sendall(("PUT %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Length: %d\r\n" %
                  (target, proxy.port, len(body)) + "".join(
                      "%s: %s\r\n" % (k, v) for k, v in req.headers.items()) + "\r\n").encode())
    interim = sock.recv(4096)
    check(interim.startswith(b"HTTP/1.1 100 Continue\r\n\r\n"), "no 100 Continue: %r" % interim)
    sock.sendall(body)
    final = b""
    while b"\r\n\r\n" not in final:
        chunk = sock.recv(4096)
        check(chunk, "no reply after the body")
        final += chunk
    sock.close()
    check(final.startswith(b"HTTP/1.1 200"), "Expect: 100-continue PUT: %r" % final[:200])
    check(direct.request("GET", prefix + "expect")[2] == body, "the continued body stored")
    client.delete_object(Bucket=bucket, Key=prefix + "boto")
    check(direct.request("HEAD", prefix + "boto")[0] == 404, "DELETE through the proxy")
    s = proxy.stats()
    check(all(s[k] == 0 for k in ("err500", "err503", "err500_after", "reset_before",
                                  "reset_after", "cut_body", "delayed")),
          "no faults while passing: %s" % s)
    check(s["forwarded"] == s["requests"], "every request forwarded: %s" % s)


def test_errors(proxy, direct, via, prefix):
    proxy.faults(script="err500,err503,err500,err503")
    before = proxy.stats()
    keep = S3(proxy.url, direct.bucket, keep=True)
    st, h, got = keep.request("PUT", prefix + "e1", b"one")
    check(st == 500 and s3_error(got) == "InternalError", "err500: %d %r" % (st, got))
    check(h.get("content-type") == "application/xml", "an XML error body")
    check(direct.request("HEAD", prefix + "e1")[0] == 404, "err500: the store untouched")
    st, _, got = keep.request("GET", prefix + "e1")
    check(st == 503 and s3_error(got) == "SlowDown", "err503: %d %r" % (st, got))
    st, _, got = keep.request("HEAD", prefix + "e1")
    check(st == 500 and got == b"", "err500 to a HEAD: no body")
    st, _, got = keep.request("DELETE", prefix + "e1")
    check(st == 503, "err503 to a DELETE")
    # The same connection goes on.
    st, _, _ = keep.request("PUT", prefix + "e1", b"one")
    check(st == 200, "the connection after the errors")
    keep.close()
    proxy.faults(script="err500_after")
    st, _, got = via.request("PUT", prefix + "e2", b"two")
    check(st == 500 and s3_error(got) == "InternalError", "err500_after: %d" % st)
    st, _, got = direct.request("GET", prefix + "e2")
    check(st == 200 and got == b"two", "err500_after: the store did the PUT")
    after = proxy.stats()
    check(after["err500"] - before["err500"] == 2 and after["err503"] - before["err503"] == 2
          and after["err500_after"] - before["err500_after"] == 1,
          "counters: %s" % after)


def test_cuts(proxy, direct, via, prefix):
    before = proxy.stats()
    proxy.faults(script="reset_before")
    why = broken(lambda: via.request("PUT", prefix + "c1", b"one"))
    check(why, "reset_before: the client saw a reply")
    check(direct.request("HEAD", prefix + "c1")[0] == 404, "reset_before: the store untouched")
    proxy.faults(script="reset_after")
    why = broken(lambda: via.request("PUT", prefix + "c2", b"two"))
    check(why, "reset_after: the client saw a reply")
    st, _, got = direct.request("GET", prefix + "c2")
    check(st == 200 and got == b"two", "reset_after: the store did the PUT")
    # cut_body: the headers, then half of the body, then the reset.
    body = os.urandom(200_000)
    check(direct.request("PUT", prefix + "c3", body)[0] == 200, "PUT c3")
    proxy.faults(script="cut_body")
    target = "/%s/%sc3" % (direct.bucket, prefix)
    raw = S3(proxy.url, direct.bucket)
    req = AWSRequest(method="GET", url="%s%s" % (proxy.url, target))
    S3SigV4Auth(raw.creds, "s3", raw.region).add_auth(req)
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=30)
    head = "GET %s HTTP/1.1\r\n" % target + "".join(
        "%s: %s\r\n" % (k, v) for k, v in req.headers.items()) + \
        "Host: 127.0.0.1:%d\r\n\r\n" % proxy.port
    # Host was not among botocore's headers: it signed the URL's, the same one.
    sock.sendall(head.encode())
    got = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            got += chunk
    except ConnectionResetError:
        pass
    sock.close()
    head_end = got.find(b"\r\n\r\n")
    check(head_end > 0 and got.startswith(b"HTTP/1.1 200"), "cut_body: the headers came")
    check(b"Content-Length: 200000" in got[:head_end], "cut_body: the full length announced")
    received = got[head_end + 4:]
    check(len(received) == 100_000 and received == body[:100_000],
          "cut_body: half the body, then the cut (%d bytes)" % len(received))
    # An answer without a body (PUT): half its head.
    proxy.faults(script="cut_body")
    why = broken(lambda: via.request("PUT", prefix + "c4", b"four"))
    check(why, "cut_body of a PUT: the client saw a reply")
    check(direct.request("GET", prefix + "c4")[2] == b"four", "cut_body of a PUT: the store did it")
    # Through botocore with no retries: each cut is an error to the client.
    client = botocore_client(proxy.url)
    for kind in ("reset_before", "reset_after", "cut_body"):
        proxy.faults(script=kind)
        why = broken(lambda: client.get_object(Bucket=direct.bucket, Key=prefix + "c3")["Body"].read())
        check(why, "botocore saw no error for %s" % kind)
    after = proxy.stats()
    check(after["reset_before"] - before["reset_before"] == 2 and
          after["reset_after"] - before["reset_after"] == 2 and
          after["cut_body"] - before["cut_body"] == 3, "counters: %s" % after)


def test_delay(proxy, direct, via, prefix):
    before = proxy.stats()["delayed"]
    proxy.faults(delay_ms=400)
    t = time.monotonic()
    st, _, _ = via.request("PUT", prefix + "d1", b"slow")
    elapsed = time.monotonic() - t
    check(st == 200, "a delayed PUT: %d" % st)
    check(elapsed >= 0.4, "the reply came %.3f s after the request, before the delay" % elapsed)
    check(proxy.stats()["delayed"] == before + 1, "the delay counted")
    proxy.faults()


def outcomes(proxy, via, prefix, n):
    """What each of n sequential HEADs saw: status, or "broken"."""
    out = []
    for i in range(n):
        try:
            out.append(via.request("HEAD", prefix + "seeded")[0])
        except (ConnectionError, http.client.HTTPException, OSError):
            out.append("broken")
    return out


def test_seeded(proxy, direct, via, prefix):
    check(direct.request("PUT", prefix + "seeded", b"s")[0] == 200, "PUT seeded")
    rates = {"err500": 0.1, "err503": 0.1, "reset_before": 0.05, "cut_body": 0.05,
             "err500_after": 0.05, "reset_after": 0.05}
    proxy.faults(seed=12345, **rates)
    before = proxy.stats()
    first = outcomes(proxy, via, prefix, 300)
    after = proxy.stats()
    proxy.faults(seed=12345, **rates)
    second = outcomes(proxy, via, prefix, 300)
    check(first == second, "the same seed, other faults")
    proxy.faults(seed=54321, **rates)
    third = outcomes(proxy, via, prefix, 300)
    check(third != first, "another seed, the same 300 outcomes")
    counts = {k: after[k] - before[k] for k in FAULTS}
    total = sum(counts.values())
    # 40% asked for: 120 expected of 300 (binomial sd 8.5).
    check(80 <= total <= 160, "faults injected: %d of 300 (%s)" % (total, counts))
    check(first.count(500) == counts["err500"] + counts["err500_after"], "500s seen vs counted")
    check(first.count(503) == counts["err503"], "503s seen vs counted")
    check(first.count("broken") == counts["reset_before"] + counts["reset_after"] +
          counts["cut_body"], "cuts seen vs counted")
    check(first.count(200) == 300 - total, "passes seen vs counted")
    print("seeded: 300 requests, faults %s" % counts)
    proxy.faults()


FAULTS = ("err500", "err503", "err500_after", "reset_before", "reset_after", "cut_body")


def test_filters(proxy, direct, via, prefix):
    proxy.faults(err503=1, methods="PUT")
    check(via.request("PUT", prefix + "f1", b"f")[0] == 503, "PUT filtered in")
    check(via.request("GET", prefix + "seeded")[0] == 200, "GET filtered out")
    proxy.faults(err500=1, path_contains=".metadata.json")
    check(via.request("PUT", prefix + "m/v1.metadata.json", b"{}")[0] == 500, "path filtered in")
    check(via.request("PUT", prefix + "m/version-hint.text", b"1")[0] == 200, "path filtered out")
    proxy.faults(script="pass,err503", methods="GET")
    check(via.request("GET", prefix + "seeded")[0] == 200, "script: pass")
    check(via.request("PUT", prefix + "f2", b"f")[0] == 200, "script: a PUT not matched")
    check(via.request("GET", prefix + "seeded")[0] == 503, "script: err503")
    check(via.request("GET", prefix + "seeded")[0] == 200, "script: done")
    proxy.faults()


def test_no_conditional(proxy, direct, via, prefix):
    inm = {"If-None-Match": "*"}
    # radosgw honours it, directly and through a passing proxy.
    check(direct.request("PUT", prefix + "n1", b"first", inm)[0] == 200, "a first create")
    st, _, got = direct.request("PUT", prefix + "n1", b"second", inm)
    check(st == 412, "radosgw took a second create directly: %d" % st)
    st, _, got = via.request("PUT", prefix + "n1", b"second", inm)
    check(st == 412 and s3_error(got) == "PreconditionFailed",
          "a second create through a passing proxy: %d %r" % (st, got))
    check(direct.request("GET", prefix + "n1")[2] == b"first", "the first create kept")
    before = proxy.stats()
    proxy.faults(no_conditional=1)
    st, _, got = via.request("PUT", prefix + "n1", b"second", inm)
    check(st == 200, "no_conditional: a second create refused: %d %r" % (st, got))
    check(direct.request("GET", prefix + "n1")[2] == b"second", "no_conditional: overwritten")
    st, _, _ = via.request("PUT", prefix + "n2", b"new", dict(inm, **{"Content-Type": "text/plain"}))
    check(st == 200, "no_conditional: a first create")
    st, h, got = direct.request("GET", prefix + "n2")
    check(got == b"new" and h.get("content-type") == "text/plain", "the other headers kept")
    # Unconditional requests pass as they are.
    check(via.request("PUT", prefix + "n3", b"plain")[0] == 200, "a plain PUT")
    after = proxy.stats()
    check(after["unconditional_rewrites"] - before["unconditional_rewrites"] == 2,
          "rewrites counted: %s" % after)
    check(after["conditional_puts"] - before["conditional_puts"] == 2, "conditional PUTs counted")
    proxy.faults()
    check(via.request("PUT", prefix + "n1", b"third", inm)[0] == 412, "healed: honoured again")


def test_control(proxy, direct, via, prefix):
    for bad in ({"err500": "0.7", "err503": "0.7"}, {"nonsense": "1"}, {"script": "explode"},
                {"delay_ms": "-1"}):
        try:
            proxy.faults(**bad)
            raise TestFailure("accepted %s" % bad)
        except urllib.error.HTTPError as e:
            check(e.code == 400, "refused %s with %d" % (bad, e.code))
    log = proxy.control("/log")
    check(isinstance(log, list) and log and {"method", "target", "fault"} <= set(log[-1]),
          "the log: %r" % log[-1:])
    s = proxy.stats()
    check(s["method_PUT"] > 0 and s["method_GET"] > 0, "per method: %s" % s)


def main():
    bucket = env("SLUICE_S3_BUCKET")
    endpoint = env("AWS_ENDPOINT_URL_S3")
    proxy = ProxyProcess(endpoint)
    direct = S3(endpoint, bucket)
    via = S3(proxy.url, bucket)
    prefix = "proxytest-%s/" % uuid.uuid4().hex[:8]
    failed = 0
    tests = [test_pass, test_errors, test_cuts, test_delay, test_seeded, test_filters,
             test_no_conditional, test_control]
    try:
        for t in tests:
            try:
                t(proxy, direct, via, prefix)
                print("PASS: %s" % t.__name__, flush=True)
            except Exception as e:  # the verdict
                traceback.print_exc()
                print("FAIL: %s: %s" % (t.__name__, e), flush=True)
                failed += 1
                proxy.faults()
        print("stats: %s" % json.dumps({k: v for k, v in proxy.stats().items()
                                         if k != "settings"}))
    finally:
        rc = proxy.stop()
    if rc != 0:
        print("FAIL: the proxy exited %s when its stdin closed" % rc)
        failed += 1
    print("%s: s3_fault_proxy_test" % ("FAIL" if failed else "PASS"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
