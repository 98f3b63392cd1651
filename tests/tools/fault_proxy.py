#!/usr/bin/python3
"""fault_proxy.py: a TCP proxy on 127.0.0.1 that injects network faults for cluster tests.

This kernel has no netem, so tests put this proxy in a path (broker to broker, broker to
etcd) and break the path at run time. Standard library only.

Modes (set for one direction or both; "up" is client -> target, "down" target -> client):
  pass       bytes flow
  blackhole  connections stay open, bytes are read and dropped (a partition: the peers
             wait until their own timeouts fire)
  hold       connections stay open, bytes are kept back until the mode changes, then
             sent in order (a partition healed before TCP gave up: late, never lost;
             blackhole loses bytes mid-stream, which TCP never does to its peers)
  delay      bytes flow, each chunk held back delay_ms (order kept)
  cut        (both directions) every open connection is reset and the listening socket
             closed, so new connections are refused (a dead machine); any other mode
             afterwards listens again on the same port

As a library:
    proxy = FaultProxy("127.0.0.1", etcd_port).start()
    ... connect to proxy.port ...
    proxy.set_mode("blackhole", direction="up")
    proxy.heal()
    proxy.close()

A cut between two processes only (a broker pair, while others still pass): every
connection through a proxy comes from 127.0.0.1, so the proxy tells clients apart by the
process holding the client end (/proc/net/tcp's inode, found among /proc/<pid>/fd):
    proxy.isolate([pid_a], mode="cut")        # or "blackhole"; others pass
    proxy.isolate([])                         # heal that

As a program (for C++ tests): fault_proxy.py --target 127.0.0.1:2379 [--listen PORT]
prints one JSON line {"port": P, "control_port": C} and then takes commands over HTTP on
127.0.0.1:C:
    GET /mode?mode=blackhole&direction=up      (also delay_ms=N)
    GET /stats                                 JSON counters
    GET /quit                                  stop
With --exit-on-stdin-eof it also stops when its stdin closes (the test that started it
died).
"""

import argparse
import collections
import http.server
import json
import os
import socket
import struct
import sys
import threading
import time
import urllib.parse

MODES = ("pass", "blackhole", "hold", "delay", "cut")
DIRECTIONS = ("up", "down", "both")


def _socket_owner(peer_port, listen_port, pids):
    """The pid among `pids` holding the TCP socket 127.0.0.1:peer_port connected to our
    listen_port (the client end of a proxied connection), or None."""
    inode = None
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10:
                continue
            local, remote = fields[1], fields[2]
            if (int(local.rsplit(":", 1)[1], 16) == peer_port
                    and int(remote.rsplit(":", 1)[1], 16) == listen_port):
                inode = fields[9]
                break
        if inode is not None:
            break
    if inode is None or inode == "0":
        return None
    want = "socket:[%s]" % inode
    for pid in pids:
        try:
            fds = os.listdir("/proc/%d/fd" % pid)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink("/proc/%d/fd/%s" % (pid, fd)) == want:
                    return pid
            except OSError:
                pass
    return None


def _reset(sock):
    """Closes `sock` with a TCP reset (SO_LINGER 0), waking any thread blocked on it."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


class _Pipe:
    """One direction of one connection: a reader thread applies the mode, a writer thread
    sends what is due, in order."""

    def __init__(self, proxy, conn, name, src, dst):
        self.proxy, self.conn, self.name, self.src, self.dst = proxy, conn, name, src, dst
        self.queue = collections.deque()  # (due, bytes); b"" = end of stream
        self.cv = threading.Condition()
        self.closed = False

    def start(self):
        for fn in (self._read, self._write):
            threading.Thread(target=fn, daemon=True, name="proxy-%s" % self.name).start()

    def _read(self):
        while True:
            try:
                data = self.src.recv(65536)
            except OSError:
                data = None
            if data is not None and not data and (self.conn.isolated or
                                                  self.proxy._mode_of(self.name)[0] == "blackhole"):
                return  # a partition loses the FIN too
            if not data:
                with self.cv:
                    self.queue.append((0, b""))
                    self.cv.notify_all()
                if data is None:
                    self.conn.close()
                return
            mode, delay_ms = self.proxy._mode_of(self.name)
            if self.conn.isolated:
                mode = "blackhole"
            if mode == "blackhole":
                self.proxy._count("dropped_" + self.name, len(data))
                continue
            due = time.monotonic() + (delay_ms / 1000.0 if mode == "delay" else 0)
            with self.cv:
                self.queue.append((due, data))
                self.cv.notify_all()

    def _write(self):
        while True:
            with self.cv:
                while not self.queue and not self.closed:
                    self.cv.wait()
                if self.closed:
                    return
                if self.proxy._mode_of(self.name)[0] == "hold":
                    self.cv.wait(0.05)  # set_mode does not wake pipes: look again soon
                    continue
                due, data = self.queue[0]
                now = time.monotonic()
                if due > now:
                    self.cv.wait(due - now)
                    continue
                self.queue.popleft()
            if not data:  # the source ended: end this direction too
                try:
                    self.dst.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                self.conn.direction_ended()
                return
            try:
                self.dst.sendall(data)
                self.proxy._count("bytes_" + self.name, len(data))
            except OSError:
                self.conn.close()
                return

    def stop(self):
        with self.cv:
            self.closed = True
            self.cv.notify_all()


class _Connection:
    def __init__(self, proxy, client, upstream):
        self.proxy, self.client, self.upstream = proxy, client, upstream
        self.up = _Pipe(proxy, self, "up", client, upstream)
        self.down = _Pipe(proxy, self, "down", upstream, client)
        self.lock = threading.Lock()
        self.done = False
        self.ended = 0  # guarded by lock: directions that saw their end of stream
        self.client_port = client.getpeername()[1]
        self.isolated = False  # set by FaultProxy.isolate(mode="blackhole"): drop its bytes

    def start(self):
        self.up.start()
        self.down.start()

    def direction_ended(self):
        with self.lock:
            self.ended += 1
            both = self.ended == 2
        if both:
            self.close()

    def close(self):
        with self.lock:
            if self.done:
                return
            self.done = True
        self.up.stop()
        self.down.stop()
        _reset(self.client)
        _reset(self.upstream)
        self.proxy._forget(self)


class FaultProxy:
    """A fault-injecting TCP proxy; thread-safe. Listens on 127.0.0.1 (`port`), forwards
    every connection to target_host:target_port."""

    def __init__(self, target_host, target_port, listen_port=0, connect_timeout=5.0):
        self.target = (target_host, int(target_port))
        self.connect_timeout = connect_timeout
        self._lock = threading.Lock()
        self._modes = {"up": ("pass", 0), "down": ("pass", 0)}  # guarded by _lock
        self._cut = False  # guarded by _lock
        self._conns = set()  # guarded by _lock
        self._stats = collections.Counter()  # guarded by _lock
        self._closing = False  # guarded by _lock
        self._listener = None  # guarded by _lock
        self._isolated = (frozenset(), "cut")  # guarded by _lock: (pids, mode)
        self.port = listen_port
        self._listen()

    def _listen(self):
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(128)
        self.port = listener.getsockname()[1]
        self._listener = listener

    def start(self):
        threading.Thread(target=self._accept_loop, args=(self._listener,), daemon=True,
                         name="proxy-accept").start()
        return self

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    # ---- control

    def set_mode(self, mode, direction="both", delay_ms=0):
        if mode not in MODES:
            raise ValueError("mode %r: one of %s" % (mode, ", ".join(MODES)))
        if direction not in DIRECTIONS:
            raise ValueError("direction %r: one of %s" % (direction, ", ".join(DIRECTIONS)))
        if mode == "delay" and int(delay_ms) < 0:
            raise ValueError("delay_ms must be >= 0")
        if mode == "cut":
            if direction != "both":
                raise ValueError("cut applies to both directions")
            with self._lock:
                self._cut = True
                conns = list(self._conns)
                listener, self._listener = self._listener, None
            if listener is not None:
                _reset(listener)
            for c in conns:
                c.close()
            return
        with self._lock:
            was_cut, self._cut = self._cut, False
            for d in ("up", "down") if direction == "both" else (direction,):
                self._modes[d] = (mode, int(delay_ms))
            if was_cut and not self._closing:
                self._listen()  # the same port again
                threading.Thread(target=self._accept_loop, args=(self._listener,),
                                 daemon=True, name="proxy-accept").start()

    def heal(self):
        self.set_mode("pass")

    def isolate(self, pids, mode="cut"):
        """Connections from the processes `pids` only: "cut" resets them and refuses new
        ones, "blackhole" keeps them and drops their bytes both ways. Others pass as the
        proxy's mode says. isolate([]) ends it; a connection blackholed before is reset
        then (bytes were lost mid-stream: its peers could only misread it)."""
        if mode not in ("cut", "blackhole"):
            raise ValueError("isolate mode %r: cut or blackhole" % mode)
        pids = frozenset(int(p) for p in pids)
        with self._lock:
            self._isolated = (pids, mode)
            conns = list(self._conns)
        for c in conns:
            hit = bool(pids) and _socket_owner(c.client_port, self.port, pids) is not None
            if c.isolated or (hit and mode == "cut"):
                c.close()
            else:
                c.isolated = hit
        if pids:
            self._count("isolations", 1)

    def cut(self):
        self.set_mode("cut")

    def blackhole(self, direction="both"):
        self.set_mode("blackhole", direction)

    def delay(self, delay_ms, direction="both"):
        self.set_mode("delay", direction, delay_ms)

    def stats(self):
        with self._lock:
            s = dict(self._stats)
            s["active"] = len(self._conns)
            s["cut"] = self._cut
            s["up"], s["down"] = self._modes["up"][0], self._modes["down"][0]
        return s

    def close(self):
        with self._lock:
            self._closing = True
            listener, self._listener = self._listener, None
        if listener is not None:
            _reset(listener)
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            c.close()

    # ---- internals

    def _mode_of(self, direction):
        with self._lock:
            return self._modes[direction]

    def _count(self, key, n):
        with self._lock:
            self._stats[key] += n

    def _forget(self, conn):
        with self._lock:
            self._conns.discard(conn)

    def _accept_loop(self, listener):
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            with self._lock:
                stop = self._cut or self._closing
                self._stats["accepted"] += 1
            if stop:  # accepted just before a cut
                _reset(client)
                continue
            threading.Thread(target=self._open, args=(client,), daemon=True).start()

    def _open(self, client):
        try:
            upstream = socket.create_connection(self.target, timeout=self.connect_timeout)
            upstream.settimeout(None)
        except OSError:
            self._count("target_refused", 1)
            _reset(client)
            return
        for s in (client, upstream):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            conn = _Connection(self, client, upstream)
        except OSError:  # the client left already
            _reset(client)
            _reset(upstream)
            return
        with self._lock:
            pids, mode = self._isolated
        if pids and _socket_owner(conn.client_port, self.port, pids) is not None:
            if mode == "cut":
                self._count("isolated_refused", 1)
                _reset(client)
                _reset(upstream)
                return
            conn.isolated = True
        with self._lock:
            if self._cut:  # cut while connecting
                conn.done = True
            else:
                self._conns.add(conn)
        if conn.done:
            _reset(client)
            _reset(upstream)
            return
        conn.start()


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
            if url.path == "/mode":
                try:
                    proxy.set_mode(q.get("mode", "pass"), q.get("direction", "both"),
                                   int(q.get("delay_ms", "0")))
                except ValueError as e:
                    return self._answer(400, {"error": str(e)})
                return self._answer(200, proxy.stats())
            if url.path == "/stats":
                return self._answer(200, proxy.stats())
            if url.path == "/quit":
                self._answer(200, {})
                threading.Thread(target=server.shutdown, daemon=True).start()
                return
            self._answer(404, {"error": "no such path"})

        do_POST = do_GET

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    return server


def main():
    ap = argparse.ArgumentParser(description="fault-injecting TCP proxy for tests")
    ap.add_argument("--target", required=True, help="HOST:PORT to forward to")
    ap.add_argument("--listen", type=int, default=0, help="port on 127.0.0.1 (0: any free)")
    ap.add_argument("--control-port", type=int, default=0)
    ap.add_argument("--exit-on-stdin-eof", action="store_true")
    args = ap.parse_args()
    host, _, port = args.target.rpartition(":")
    proxy = FaultProxy(host or "127.0.0.1", int(port), args.listen).start()
    server = _serve_control(proxy, args.control_port)
    print(json.dumps({"port": proxy.port, "control_port": server.server_address[1]}), flush=True)

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
