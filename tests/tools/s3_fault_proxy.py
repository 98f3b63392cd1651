#!/usr/bin/python3
"""s3_fault_proxy.py: an HTTP reverse proxy on 127.0.0.1 in front of an S3 endpoint (radosgw
in tests) that injects the failures an object store shows, for the S3 lake tests (issue 26).

Requests are forwarded byte for byte: the request line, every header (Host exactly as the
client sent it: its SigV4 signature covers it, and radosgw accepts any Host in path-style
addressing) and the body, over a fresh upstream connection per request; the store's answer
comes back byte for byte, except for interim 1xx answers (the proxy answers
`Expect: 100-continue` itself, then sends the whole request upstream at once). Clients keep
their connection across requests (HTTP/1.1 keep-alive), as libcurl and botocore do.

Faults, drawn per request from one random sequence (random.Random(seed)): the n-th request
that matches the filters gets the n-th draw, so a seed repeats the same faults in the same
order (which request is the n-th depends on how concurrent clients interleave). Kinds:

  err500        answered 500 InternalError (an S3 XML <Error> body), not forwarded
  err503        answered 503 SlowDown, not forwarded
  err500_after  forwarded (the store did it), then answered 500 InternalError: the
                ambiguous failure of a real store
  reset_before  the client connection reset (TCP RST) before anything is forwarded
  reset_after   forwarded (the store did it), then the client connection reset before a
                single byte of the answer: a lost reply
  cut_body      forwarded, the answer's headers and half its body sent, then a reset (an
                answer without a body: half its header bytes); a reply cut short
and, drawn independently, a delay: the request held delay_ms before it is forwarded (a slow
store). At most one of the kinds above per request; their rates sum to at most 1.

no_conditional: the store behaves as one that ignores `If-None-Match: *`: a PUT carrying
If-None-Match is forwarded without that header, so a create over an existing key succeeds
and overwrites it. The client signed the header (SigV4 covers every header it sends), so
the proxy re-signs the rewritten request with botocore's S3SigV4Auth, using the test's
credentials: the access key id and region from the request's own Authorization header,
the secret from --secret-key or AWS_SECRET_ACCESS_KEY (radosgw's test keys). The payload
must be signed with its SHA-256 or UNSIGNED-PAYLOAD (sluice's client and botocore over
http); an aws-chunked streaming body cannot be re-signed: it is forwarded unchanged and
counted as rewrite_unsupported.

Filters: methods (e.g. "PUT,GET") and path_contains (a substring of the request target)
limit the faults, delays included, to matching requests; others always pass. A script (a
list of kinds, "pass" included) gives the next matching requests their faults in order
before the random draws resume: deterministic single faults for tests.

As a library:
    proxy = S3FaultProxy("127.0.0.1", rgw_port).start()
    ... point AWS_ENDPOINT_URL_S3 at http://127.0.0.1:<proxy.port> ...
    proxy.set_faults(seed=7, err503=0.1, err500=0.05, delay_ms=200, delay_rate=0.1)
    proxy.set_faults(no_conditional=True)
    proxy.set_faults(script=["reset_after"], methods="PUT", path_contains=".metadata.json")
    proxy.set_faults()   # pass everything
    proxy.stats(); proxy.close()

As a program: s3_fault_proxy.py --target 127.0.0.1:7480 (or http://127.0.0.1:7480)
[--listen PORT] [--control-port PORT] [--seed N] prints one JSON line
{"port": P, "control_port": C, "seed": N} and takes commands over HTTP on 127.0.0.1:C:
    GET /faults?seed=7&err503=0.1&err500=0.05&delay_ms=200&delay_rate=0.1
        (every fault setting at once; what is not given is off; also no_conditional=1,
        methods=PUT,GET, path_contains=..., script=reset_after,pass,err503; also
        accepted as /mode)
    GET /stats      JSON counters: requests, forwarded, one per fault kind, delayed,
                    unconditional_rewrites, conditional_puts, upstream 412s and errors,
                    per method; and the settings in force
    GET /log        the last 2,000 requests: method, target, fault, upstream status
    GET /quit       stop
With --exit-on-stdin-eof it also stops when its stdin closes (the test that started it
died). Standard library, plus python3-botocore for no_conditional; run with /usr/bin/python3.
"""

import argparse
import collections
import http.server
import json
import os
import random
import socket
import struct
import sys
import threading
import time
import urllib.parse
from email.utils import formatdate

FAULT_KINDS = ("err500", "err503", "err500_after", "reset_before", "reset_after", "cut_body")
SCRIPT_KINDS = FAULT_KINDS + ("pass", "delay")

_MAX_HEAD = 64 * 1024
_IDLE_TIMEOUT = 300.0  # a client connection quiet this long is closed
_UPSTREAM_TIMEOUT = 120.0


class _Closed(Exception):
    """The peer closed or broke the connection."""


def _reset(sock, reader=None):
    """Closes `sock` with a TCP reset (SO_LINGER 0). Its makefile() reader, if any, is
    closed first: Python closes the descriptor only when the last of them goes."""
    if sock is None:
        return
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    _close(sock, reader, shutdown=False)


def _close(sock, reader=None, shutdown=True):
    if sock is None:
        return
    if shutdown:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    if reader is not None:
        try:
            reader.close()
        except OSError:
            pass
    try:
        sock.close()
    except OSError:
        pass


class _Message:
    """One HTTP message as received: the raw head (start line and headers, CRLFCRLF
    included), the parsed start line and headers, and the raw body bytes (chunked framing
    kept as it came)."""

    def __init__(self, head, start, headers):
        self.head = head
        self.start = start  # the start line, decoded as latin-1
        self.headers = headers  # [(name, value)] in order, as sent
        self.body = b""

    def header(self, name):
        name = name.lower()
        for n, v in self.headers:
            if n.lower() == name:
                return v.strip()
        return None

    def tokens(self, name):
        v = self.header(name)
        return {t.strip().lower() for t in v.split(",")} if v else set()


def _read_head(reader, first_byte_eof_ok):
    """Reads one message head from the buffered reader. None when the stream ended before
    its first byte and first_byte_eof_ok; _Closed otherwise."""
    lines = []
    size = 0
    while True:
        try:
            line = reader.readline(_MAX_HEAD + 1)
        except OSError as e:
            raise _Closed(str(e))
        if not line:
            if not lines and first_byte_eof_ok:
                return None
            raise _Closed("the connection ended inside a message head")
        if not lines and line in (b"\r\n", b"\n"):
            continue  # RFC 9112: a server ignores empty lines before a request line
        lines.append(line)
        size += len(line)
        if size > _MAX_HEAD:
            raise _Closed("a message head over 64 KiB")
        if line in (b"\r\n", b"\n"):
            break
    head = b"".join(lines)
    text = head.decode("latin-1").split("\r\n") if b"\r\n" in head else \
        head.decode("latin-1").split("\n")
    start = text[0].strip()
    headers = []
    for raw in text[1:]:
        if not raw:
            continue
        name, sep, value = raw.partition(":")
        if not sep:
            raise _Closed("a malformed header line")
        headers.append((name.strip(), value.strip()))
    return _Message(head, start, headers)


def _read_exact(reader, n):
    out = []
    while n > 0:
        try:
            chunk = reader.read(min(n, 1 << 20))
        except OSError as e:
            raise _Closed(str(e))
        if not chunk:
            raise _Closed("the connection ended inside a body")
        out.append(chunk)
        n -= len(chunk)
    return b"".join(out)


def _read_body(reader, msg, until_eof_ok):
    """The raw body of `msg` by its framing: chunked (kept as it came, trailers included),
    Content-Length, or (responses only) up to the end of the connection. Returns whether
    the body ran to the end of the connection."""
    if "chunked" in msg.tokens("transfer-encoding"):
        parts = []
        while True:
            try:
                line = reader.readline(4096)
            except OSError as e:
                raise _Closed(str(e))
            if not line.endswith(b"\n"):
                raise _Closed("the connection ended inside a chunked body")
            parts.append(line)
            size = int(line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while True:  # trailers up to the empty line
                    try:
                        t = reader.readline(_MAX_HEAD)
                    except OSError as e:
                        raise _Closed(str(e))
                    if not t:
                        raise _Closed("the connection ended inside chunked trailers")
                    parts.append(t)
                    if t in (b"\r\n", b"\n"):
                        break
                break
            parts.append(_read_exact(reader, size))
            parts.append(_read_exact(reader, 2))
        msg.body = b"".join(parts)
        return False
    length = msg.header("content-length")
    if length is not None:
        msg.body = _read_exact(reader, int(length))
        return False
    if not until_eof_ok:
        msg.body = b""
        return False
    parts = []
    while True:
        try:
            chunk = reader.read(1 << 16)
        except OSError:
            break
        if not chunk:
            break
        parts.append(chunk)
    msg.body = b"".join(parts)
    return True


def _error_response(code, s3_code, message, resource, request_id, head_only, close):
    reason = {500: "Internal Server Error", 503: "Slow Down"}.get(code, "Error")
    body = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code><Message>%s"
            "</Message><Resource>%s</Resource><RequestId>%s</RequestId></Error>"
            % (s3_code, message, _xml_escape(resource), request_id)).encode()
    head = ("HTTP/1.1 %d %s\r\nContent-Type: application/xml\r\nContent-Length: %d\r\n"
            "x-amz-request-id: %s\r\nDate: %s\r\nConnection: %s\r\n\r\n"
            % (code, reason, 0 if head_only else len(body), request_id,
               formatdate(usegmt=True), "close" if close else "keep-alive")).encode()
    return head if head_only else head + body


def _xml_escape(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class _Unsupported(Exception):
    pass


def _resign_without_if_none_match(req, secret_key):
    """The raw bytes of `req` (a PUT) without If-None-Match, signed anew with SigV4
    (botocore's S3SigV4Auth) for the access key and region of its own Authorization."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    auth = req.header("authorization") or ""
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        raise _Unsupported("not a SigV4 header signature")
    sha = (req.header("x-amz-content-sha256") or "").upper()
    if sha.startswith("STREAMING-"):
        raise _Unsupported("an aws-chunked body")
    if "chunked" in req.tokens("transfer-encoding"):
        raise _Unsupported("a chunked body")
    cred = auth.split("Credential=", 1)[1].split(",", 1)[0].strip()
    access_key, _date, region, service, _term = cred.split("/")
    token = req.header("x-amz-security-token")
    dropped = {"if-none-match", "authorization", "x-amz-date", "x-amz-content-sha256", "date"}
    kept = [(n, v) for n, v in req.headers if n.lower() not in dropped]
    method, target, version = req.start.split(" ", 2)
    host = req.header("host") or "localhost"
    aws = AWSRequest(method=method, url="http://%s%s" % (host, target), data=req.body)
    for n, v in kept:
        aws.headers[n] = v
    S3SigV4Auth(Credentials(access_key, secret_key, token), service, region).add_auth(aws)
    lines = ["%s %s %s" % (method, target, version)]
    lines += ["%s: %s" % (n, v) for n, v in kept]
    for n in ("X-Amz-Date", "X-Amz-Content-SHA256", "Authorization"):
        lines.append("%s: %s" % (n, aws.headers[n]))
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + req.body


class S3FaultProxy:
    """The fault-injecting S3 proxy; thread-safe. Listens on 127.0.0.1 (`port`) and sends
    every request to target_host:target_port."""

    def __init__(self, target_host, target_port, listen_port=0, secret_key=None, seed=None):
        self.target = (target_host, int(target_port))
        self.secret_key = secret_key or os.environ.get("AWS_SECRET_ACCESS_KEY", "")
        self._lock = threading.Lock()
        self._stats = collections.Counter()  # guarded by _lock
        self._log = collections.deque(maxlen=2000)  # guarded by _lock
        self._conns = set()  # guarded by _lock: client sockets
        self._closing = False
        self._requests = 0  # guarded by _lock
        self.set_faults(seed=seed)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", listen_port))
        self._listener.listen(256)
        self.port = self._listener.getsockname()[1]

    def start(self):
        threading.Thread(target=self._accept_loop, daemon=True, name="s3proxy-accept").start()
        return self

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    # ---- control

    def set_faults(self, seed=None, delay_ms=0, delay_rate=None, no_conditional=False,
                   methods=None, path_contains=None, script=None, **rates):
        """Replaces every fault setting (what is not given is off). Rates are fractions of
        the matching requests, per kind of FAULT_KINDS; delay_rate defaults to 1 when
        delay_ms is set. A new seed (random when None) restarts the draws."""
        for kind in rates:
            if kind not in FAULT_KINDS:
                raise ValueError("unknown fault %r: one of %s" % (kind, ", ".join(FAULT_KINDS)))
        clean = {k: float(rates.get(k, 0) or 0) for k in FAULT_KINDS}
        if any(r < 0 or r > 1 for r in clean.values()) or sum(clean.values()) > 1 + 1e-9:
            raise ValueError("fault rates must be in [0, 1] and sum to at most 1")
        delay_ms = int(delay_ms or 0)
        if delay_ms < 0:
            raise ValueError("delay_ms must be >= 0")
        if delay_rate is None:
            delay_rate = 1.0 if delay_ms > 0 else 0.0
        delay_rate = float(delay_rate)
        if not 0 <= delay_rate <= 1:
            raise ValueError("delay_rate must be in [0, 1]")
        if isinstance(methods, str):
            methods = [m for m in methods.split(",") if m]
        methods = frozenset(m.upper() for m in methods) if methods else None
        if isinstance(script, str):
            script = [s for s in script.split(",") if s]
        script = list(script or [])
        for s in script:
            if s not in SCRIPT_KINDS:
                raise ValueError("unknown script step %r: one of %s" % (s, ", ".join(SCRIPT_KINDS)))
        if seed is None or seed == "":
            seed = random.SystemRandom().randrange(1 << 31)
        seed = int(seed)
        with self._lock:
            self._rates = clean
            self._delay_ms = delay_ms
            self._delay_rate = delay_rate
            self._no_conditional = bool(no_conditional)
            self._methods = methods
            self._path_contains = path_contains or None
            self._script = collections.deque(script)
            self._seed = seed
            self._rng = random.Random(seed)
        return self.settings()

    def settings(self):
        with self._lock:
            return {"seed": self._seed, "rates": dict(self._rates), "delay_ms": self._delay_ms,
                    "delay_rate": self._delay_rate, "no_conditional": self._no_conditional,
                    "methods": sorted(self._methods) if self._methods else None,
                    "path_contains": self._path_contains, "script": list(self._script)}

    def heal(self):
        self.set_faults()

    def stats(self):
        with self._lock:
            s = {k: 0 for k in FAULT_KINDS}
            s.update({"requests": 0, "forwarded": 0, "delayed": 0, "unconditional_rewrites": 0,
                      "conditional_puts": 0, "upstream_412": 0, "upstream_errors": 0})
            s.update(self._stats)
            s["active_connections"] = len(self._conns)
        s["settings"] = self.settings()
        return s

    def log(self):
        with self._lock:
            return list(self._log)

    def close(self):
        with self._lock:
            self._closing = True
            conns = list(self._conns)
        _close(self._listener)
        for c in conns:  # wakes the connection's thread, which closes it
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    # ---- internals

    def _count(self, key, n=1):
        with self._lock:
            self._stats[key] += n

    def _decide(self, method, target):
        """(n, fault kind or None, delay_ms) for one request."""
        with self._lock:
            self._requests += 1
            n = self._requests
            self._stats["requests"] += 1
            self._stats["method_" + method] += 1
            if (self._methods is not None and method not in self._methods) or \
                    (self._path_contains is not None and self._path_contains not in target):
                return n, None, 0
            # Two draws per matching request, always, so the sequence stays the seed's.
            r_fault, r_delay = self._rng.random(), self._rng.random()
            delay = self._delay_ms if r_delay < self._delay_rate else 0
            if self._script:
                step = self._script.popleft()
                if step == "delay":
                    return n, None, self._delay_ms
                return n, (None if step == "pass" else step), delay
            acc = 0.0
            for kind in FAULT_KINDS:
                acc += self._rates[kind]
                if r_fault < acc:
                    return n, kind, delay
            return n, None, delay

    def _record(self, entry):
        with self._lock:
            self._log.append(entry)

    def _accept_loop(self):
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._closing:
                _reset(client)
                continue
            threading.Thread(target=self._serve, args=(client,), daemon=True,
                             name="s3proxy-conn").start()

    def _serve(self, client):
        with self._lock:
            self._conns.add(client)
        reader = None
        reset = False
        try:
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            client.settimeout(_IDLE_TIMEOUT)
            reader = client.makefile("rb")
            while not self._closing:
                outcome = self._one_request(client, reader)
                if outcome != "next":
                    reset = outcome == "reset"
                    break
        except (_Closed, OSError):
            pass
        finally:
            with self._lock:
                self._conns.discard(client)
            if reset:
                _reset(client, reader)
            else:
                _close(client, reader)

    def _one_request(self, client, reader):
        """Serves one request: "next" when the connection may carry another, "close" when
        it ends, "reset" when it is to be reset."""
        req = _read_head(reader, first_byte_eof_ok=True)
        if req is None:
            return "close"
        parts = req.start.split(" ")
        if len(parts) != 3:
            raise _Closed("a malformed request line")
        method, target, version = parts
        if "100-continue" in req.tokens("expect") and (
                req.header("content-length") not in (None, "0") or
                "chunked" in req.tokens("transfer-encoding")):
            client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        _read_body(reader, req, until_eof_ok=False)
        close_after = "close" in req.tokens("connection") or version == "HTTP/1.0"
        n, fault, delay = self._decide(method, target)
        entry = {"n": n, "method": method, "target": target, "fault": fault, "delay_ms": delay}
        conditional = method == "PUT" and req.header("if-none-match") is not None
        if conditional:
            entry["conditional"] = True
            self._count("conditional_puts")
        try:
            if delay:
                self._count("delayed")
                time.sleep(delay / 1000.0)
            if fault == "reset_before":
                self._count(fault)
                return "reset"
            if fault in ("err500", "err503"):
                self._count(fault)
                code, s3_code, message = (
                    (500, "InternalError", "We encountered an internal error. Please try again.")
                    if fault == "err500" else
                    (503, "SlowDown", "Please reduce your request rate."))
                entry["status"] = code
                client.sendall(_error_response(code, s3_code, message, target.split("?")[0],
                                               "sluice-fault-%d" % n, method == "HEAD",
                                               close_after))
                return "close" if close_after else "next"
            raw = req.head + req.body
            with self._lock:
                rewrite = self._no_conditional
            if conditional and rewrite:
                try:
                    raw = _resign_without_if_none_match(req, self.secret_key)
                    self._count("unconditional_rewrites")
                    entry["rewritten"] = True
                except _Unsupported as e:
                    self._count("rewrite_unsupported")
                    entry["rewrite_unsupported"] = str(e)
            resp, resp_closes = self._forward(raw, method)
            if resp is None:  # the store failed to answer: so does the proxy
                self._count("upstream_errors")
                entry["status"] = "upstream error"
                return "reset"
            status = resp.start.split(" ")[1] if " " in resp.start else "?"
            entry["status"] = int(status) if status.isdigit() else status
            if entry["status"] == 412:
                self._count("upstream_412")
            self._count("forwarded")
            if fault == "reset_after":
                self._count(fault)
                return "reset"
            if fault == "cut_body":
                self._count(fault)
                if resp.body:
                    client.sendall(resp.head + resp.body[:len(resp.body) // 2])
                else:
                    client.sendall(resp.head[:len(resp.head) // 2])
                time.sleep(0.05)  # let the client take those bytes before the reset
                return "reset"
            if fault == "err500_after":
                self._count(fault)
                entry["store_status"] = entry["status"]
                entry["status"] = 500
                client.sendall(_error_response(
                    500, "InternalError", "We encountered an internal error. Please try again.",
                    target.split("?")[0], "sluice-fault-%d" % n, method == "HEAD", close_after))
                return "close" if close_after else "next"
            client.sendall(resp.head + resp.body)
            if close_after or resp_closes or "close" in resp.tokens("connection"):
                return "close"
            return "next"
        finally:
            self._record(entry)

    def _forward(self, raw, method):
        """Sends one request upstream on a connection of its own: (the final response,
        whether its body ran to the end of the connection), or (None, True)."""
        try:
            up = socket.create_connection(self.target, timeout=_UPSTREAM_TIMEOUT)
        except OSError:
            return None, True
        reader = None
        try:
            up.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            up.sendall(raw)
            reader = up.makefile("rb")
            while True:
                resp = _read_head(reader, first_byte_eof_ok=False)
                code = resp.start.split(" ")[1] if resp.start.count(" ") >= 1 else ""
                if code.startswith("1") and code != "101":
                    continue  # interim (100 Continue): the proxy answered it already
                break
            if method == "HEAD" or code in ("204", "304"):
                resp.body = b""
                to_eof = False
            else:
                to_eof = _read_body(reader, resp, until_eof_ok=True)
            return resp, to_eof
        except (_Closed, OSError, ValueError):
            return None, True
        finally:
            _close(up, reader)


def _serve_control(proxy, port):
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _answer(self, code, obj):
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            url = urllib.parse.urlparse(self.path)
            q = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query).items()}
            if url.path in ("/faults", "/mode"):
                kw = dict(q)
                if "no_conditional" in kw:
                    kw["no_conditional"] = kw["no_conditional"].lower() in ("1", "true", "yes")
                try:
                    return self._answer(200, proxy.set_faults(**kw))
                except (TypeError, ValueError) as e:
                    return self._answer(400, {"error": str(e)})
            if url.path == "/stats":
                return self._answer(200, proxy.stats())
            if url.path == "/log":
                return self._answer(200, proxy.log())
            if url.path == "/quit":
                self._answer(200, {})
                threading.Thread(target=server.shutdown, daemon=True).start()
                return
            self._answer(404, {"error": "no such path"})

        do_POST = do_GET

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    return server


def main():
    ap = argparse.ArgumentParser(description="fault-injecting S3 reverse proxy for tests")
    ap.add_argument("--target", required=True,
                    help="the S3 endpoint: HOST:PORT or http://HOST:PORT")
    ap.add_argument("--listen", type=int, default=0, help="port on 127.0.0.1 (0: any free)")
    ap.add_argument("--control-port", type=int, default=0)
    ap.add_argument("--seed", type=int, default=None, help="the draws' seed (default: random)")
    ap.add_argument("--secret-key", default=None,
                    help="for re-signing in no_conditional mode (default AWS_SECRET_ACCESS_KEY)")
    ap.add_argument("--exit-on-stdin-eof", action="store_true")
    args = ap.parse_args()
    target = args.target
    if "://" in target:
        target = urllib.parse.urlparse(target).netloc
    host, _, port = target.rpartition(":")
    proxy = S3FaultProxy(host or "127.0.0.1", int(port), args.listen, args.secret_key,
                         args.seed).start()
    server = _serve_control(proxy, args.control_port)
    print(json.dumps({"port": proxy.port, "control_port": server.server_address[1],
                      "seed": proxy.settings()["seed"]}), flush=True)

    def watch_stdin():  # the parent died or closed our stdin: stop
        try:
            while sys.stdin.buffer.read(4096):
                pass
        except (OSError, ValueError):
            pass
        server.shutdown()

    if args.exit_on_stdin_eof:
        threading.Thread(target=watch_stdin, daemon=True).start()
    server.serve_forever()
    proxy.close()


if __name__ == "__main__":
    main()
