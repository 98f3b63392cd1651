#!/usr/bin/python3
"""Tests of fault_proxy.py with a plain echo server: every mode, each direction alone, one
client process isolated while another passes, and the HTTP control of the program form. Absence of bytes is checked by waiting a while (a
lower bound the proxy enforces), never by asserting how fast anything is."""

import json
import os
import socket
import subprocess
import sys
import threading
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fault_proxy import FaultProxy  # noqa: E402


class EchoServer:
    """Echoes every byte back; counts what it received."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.received = 0
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._echo, args=(c,), daemon=True).start()

    def _echo(self, c):
        with c:
            while True:
                try:
                    data = c.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                with self.lock:
                    self.received += len(data)
                try:
                    c.sendall(data)
                except OSError:
                    return

    def count(self):
        with self.lock:
            return self.received

    def close(self):
        self.sock.close()


def recv_exactly(sock, n, timeout=10.0):
    sock.settimeout(timeout)
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed after %d bytes" % len(out))
        out += chunk
    return out


def nothing_arrives(sock, wait=0.5):
    sock.settimeout(wait)
    try:
        data = sock.recv(1)
    except socket.timeout:
        return True
    return False if data else "closed"


def wait_until(cond, limit=30.0):
    deadline = time.monotonic() + limit
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


_CHILD = r"""
import socket, sys
port = int(sys.argv[1])
s = socket.create_connection(("127.0.0.1", port), timeout=10)
for line in sys.stdin:
    cmd, _, arg = line.strip().partition(" ")
    if cmd == "reconnect":
        s.close()
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
        except OSError:
            pass
    try:
        s.settimeout(1.0)
        s.sendall(arg.encode())
        got = b""
        while len(got) < len(arg):
            b = s.recv(len(arg) - len(got))
            if not b:
                break
            got += b
        print(got.decode() if got else "CLOSED", flush=True)
    except socket.timeout:
        print("TIMEOUT", flush=True)
    except OSError:
        print("CLOSED", flush=True)
"""


class Child:
    """A client in another process (isolate() tells processes apart): echo() sends a word
    over its connection and answers what came back, "TIMEOUT" or "CLOSED"."""

    def __init__(self, port):
        self.proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(port)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def _ask(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def echo(self, word):
        return self._ask("send " + word)

    def reconnect_and_echo(self, word):
        return self._ask("reconnect " + word)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        self.proc.stdout.close()


class FaultProxyTest(unittest.TestCase):
    def setUp(self):
        self.echo = EchoServer()
        self.proxy = FaultProxy("127.0.0.1", self.echo.port).start()

    def tearDown(self):
        self.proxy.close()
        self.echo.close()

    def connect(self):
        return socket.create_connection(("127.0.0.1", self.proxy.port), timeout=10)

    def test_pass_forwards_both_ways_and_large_payloads(self):
        with self.connect() as s:
            s.sendall(b"hello")
            self.assertEqual(recv_exactly(s, 5), b"hello")
            big = os.urandom(1 << 20)
            threading.Thread(target=s.sendall, args=(big,), daemon=True).start()
            self.assertEqual(recv_exactly(s, len(big)), big)
        self.assertTrue(wait_until(lambda: self.proxy.stats()["active"] == 0))

    def test_blackhole_keeps_the_connection_and_drops_bytes(self):
        with self.connect() as s:
            s.sendall(b"a")
            self.assertEqual(recv_exactly(s, 1), b"a")
            self.proxy.blackhole()
            s.sendall(b"lost")
            self.assertIs(nothing_arrives(s), True)
            self.assertEqual(self.echo.count(), 1)
            self.proxy.heal()
            s.sendall(b"back")
            self.assertEqual(recv_exactly(s, 4), b"back")
        self.assertGreaterEqual(self.proxy.stats()["dropped_up"], 4)

    def test_blackhole_of_one_direction_only(self):
        with self.connect() as s:
            self.proxy.blackhole("down")
            s.sendall(b"xyz")
            # The target gets the bytes; its answer is dropped on the way back.
            self.assertTrue(wait_until(lambda: self.echo.count() == 3))
            self.assertIs(nothing_arrives(s), True)
            self.proxy.set_mode("blackhole", "up")
            self.proxy.set_mode("pass", "down")
            s.sendall(b"q")
            self.assertIs(nothing_arrives(s), True)
            self.assertEqual(self.echo.count(), 3)

    def test_hold_keeps_bytes_until_healed_then_sends_them_in_order(self):
        with self.connect() as s:
            s.sendall(b"a")
            self.assertEqual(recv_exactly(s, 1), b"a")
            self.proxy.set_mode("hold")
            s.sendall(b"late")
            s.sendall(b"r")
            self.assertIs(nothing_arrives(s), True)
            self.assertEqual(self.echo.count(), 1)  # nothing reached the target either
            self.proxy.heal()
            self.assertEqual(recv_exactly(s, 5), b"later")

    def test_hold_of_one_direction_only(self):
        with self.connect() as s:
            self.proxy.set_mode("hold", direction="down")
            s.sendall(b"xy")
            self.assertTrue(wait_until(lambda: self.echo.count() == 2))  # up still flows
            self.assertIs(nothing_arrives(s), True)
            self.proxy.heal()
            self.assertEqual(recv_exactly(s, 2), b"xy")

    def test_delay_holds_bytes_back_in_order(self):
        with self.connect() as s:
            self.proxy.delay(1500, "up")
            for i in range(10):
                s.sendall(b"%d" % i)
            # Nothing can come back before the delay has passed.
            self.assertIs(nothing_arrives(s, 0.5), True)
            self.assertEqual(recv_exactly(s, 10), b"0123456789")
            self.proxy.heal()
            s.sendall(b"now")
            self.assertEqual(recv_exactly(s, 3), b"now")

    def test_cut_resets_open_connections_and_refuses_new_ones_until_healed(self):
        s = self.connect()
        s.sendall(b"1")
        self.assertEqual(recv_exactly(s, 1), b"1")
        self.proxy.cut()
        with self.assertRaises((ConnectionError, OSError)):
            s.sendall(b"2")
            recv_exactly(s, 1, timeout=5)
        s.close()
        with self.assertRaises(ConnectionRefusedError):
            self.connect()
        self.assertTrue(self.proxy.stats()["cut"])
        self.proxy.heal()
        with self.connect() as again:
            again.sendall(b"4")
            self.assertEqual(recv_exactly(again, 1), b"4")

    def test_a_closed_client_closes_the_target_side(self):
        s = self.connect()
        s.sendall(b"x")
        recv_exactly(s, 1)
        s.close()
        self.assertTrue(wait_until(lambda: self.proxy.stats()["active"] == 0))

    def test_bad_modes_are_rejected(self):
        with self.assertRaises(ValueError):
            self.proxy.set_mode("slow")
        with self.assertRaises(ValueError):
            self.proxy.set_mode("cut", "up")
        with self.assertRaises(ValueError):
            self.proxy.set_mode("blackhole", "sideways")

    def test_isolate_cuts_one_process_only(self):
        child = Child(self.proxy.port)
        try:
            mine = self.connect()
            self.assertEqual(child.echo("a"), "a")
            self.proxy.isolate([child.proc.pid], mode="cut")
            self.assertEqual(child.echo("b"), "CLOSED")  # its open connection was reset
            self.assertEqual(child.reconnect_and_echo("c"), "CLOSED")  # new ones refused
            mine.sendall(b"mine")
            self.assertEqual(recv_exactly(mine, 4), b"mine")  # this process still passes
            self.proxy.isolate([])
            self.assertEqual(child.reconnect_and_echo("d"), "d")
            mine.close()
        finally:
            child.close()

    def test_isolate_blackholes_one_process_then_resets_it_at_heal(self):
        child = Child(self.proxy.port)
        try:
            mine = self.connect()
            self.assertEqual(child.echo("a"), "a")
            self.proxy.isolate([child.proc.pid], mode="blackhole")
            self.assertEqual(child.echo("b"), "TIMEOUT")  # kept open, bytes dropped
            mine.sendall(b"mine")
            self.assertEqual(recv_exactly(mine, 4), b"mine")
            self.proxy.isolate([])
            self.assertEqual(child.echo("c"), "CLOSED")  # lost bytes: reset at heal
            self.assertEqual(child.reconnect_and_echo("e"), "e")
            mine.close()
        finally:
            child.close()

    def test_isolate_refuses_bad_modes(self):
        with self.assertRaises(ValueError):
            self.proxy.isolate([1], mode="delay")


class FaultProxyProgramTest(unittest.TestCase):
    def test_controlled_over_http(self):
        echo = EchoServer()
        here = os.path.dirname(os.path.abspath(__file__))
        proc = subprocess.Popen(
            [sys.executable, os.path.join(here, "fault_proxy.py"), "--target",
             "127.0.0.1:%d" % echo.port, "--exit-on-stdin-eof"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            ports = json.loads(proc.stdout.readline())
            control = "http://127.0.0.1:%d" % ports["control_port"]

            def get(path):
                with urllib.request.urlopen(control + path, timeout=10) as r:
                    return json.loads(r.read())

            with socket.create_connection(("127.0.0.1", ports["port"]), timeout=10) as s:
                s.sendall(b"hi")
                self.assertEqual(recv_exactly(s, 2), b"hi")
                st = get("/mode?mode=blackhole&direction=up")
                self.assertEqual(st["up"], "blackhole")
                self.assertEqual(st["down"], "pass")
                s.sendall(b"gone")
                self.assertIs(nothing_arrives(s), True)
                get("/mode?mode=pass")
                s.sendall(b"ok")
                self.assertEqual(recv_exactly(s, 2), b"ok")
            with self.assertRaises(urllib.error.HTTPError):
                get("/mode?mode=bogus")
            self.assertEqual(get("/stats")["accepted"], 1)
            proc.stdin.close()  # the test "dies": the proxy stops
            self.assertEqual(proc.wait(timeout=30), 0)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
            echo.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
