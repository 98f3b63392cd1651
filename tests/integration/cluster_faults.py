#!/usr/bin/python3
"""A seeded fault run over three `sluice serve --etcd` brokers and a real etcd (issue 21's
"Tests", docs/design/0018-cluster.md "faults (session 13)").

Clients run throughout: an idempotent confluent-kafka producer with acks=all writing
"<producer>:<sequence>" values round the partitions of a topic with replication factor 3
and min.insync.replicas=2, a transactional producer writing a second topic in
transactions of one to four records, committed or aborted by a seeded choice, and a
consumer in a group committing its offsets (and reading them back with OffsetFetch) as it
goes. Meanwhile faults drawn by a seeded RNG hit one broker at a time (the issue's fault
model) — the leader of a partition, or the broker FindCoordinator names for the group or
for the transactional id — each healed before the next:

  kill        SIGKILL a partition's leader, restart it after a while
  kill_wipe   the same, its data directory removed before the restart (a new incarnation)
  pause       SIGSTOP a leader for longer than the session timeout, then SIGCONT
  cut_brokers the inter-broker path between a leader and a follower cut (or blackholed)
              both ways; every broker's --inter-broker-addr is a fault proxy in front of
              it, which tells the connecting brokers apart (FaultProxy.isolate); the
              brokers' replica.lag.time.max.ms is 5 s and some cuts are longer, so ISRs
              shrink and grow back
  cut_etcd    a broker's path to etcd cut, or held (bytes kept back until healed, as
              TCP would deliver them late), its --etcd being a proxy
  etcd_kill   etcd SIGKILLed and restarted on the same data directory (tmpfs)

After each heal the run waits until every broker is back and every ISR is whole (the
internal topics' too). At the end everything is healed, the clients stop, every partition
is read from its start (a consumer for the records, raw Fetch for each batch's leader
epoch; the transactional topic read_committed, to its high watermark), each broker's log is
searched for the leaderships it took ("<t>-<p>: leader in epoch E"), etcd's whole history
of the partitions' states gives the leader it elected for each epoch, every broker's copy
of each partition (its segment files) is compared batch by batch below the high
watermark, and
tests/tools/history_checker.py checks the whole history: every acknowledged record read
back exactly once at its offset, in order per producer and partition, committed offsets
never going back, one leader per partition and epoch, every acknowledged epoch led, every
committed transaction read back whole and once, no aborted one, an unknown one all or
nothing.

The seed is printed at the start and with any failure; --seed replays a run (the faults'
kinds, targets and durations; the cluster's timing is not replayable).

usage: /usr/bin/python3 cluster_faults.py path/to/sluice [--faults N] [--seed S]
                                          [--keep DIR] [--offsets-not-replicated]
Exit 0 when every check holds, 1 otherwise (with the seed and the violations).
"""

import argparse
import json
import logging
import os
import random
import re
import shutil
import signal
import socket
import struct
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
from cluster_controller_test import ClusterBroker, metadata  # noqa: E402
from cluster_coordinator_test import find_coordinator  # noqa: E402
from cluster_replication_test import _watermarks, isr_of, leaders_of, read_all  # noqa: E402
from etcd_util import EtcdCluster, b64, prefix_end, unavailable, unb64  # noqa: E402
from fault_proxy import FaultProxy  # noqa: E402
import history_checker  # noqa: E402
from sluice_broker import TestFailure, _frame, _recv_exact, check, wait_until  # noqa: E402

from confluent_kafka import (Consumer, KafkaError, KafkaException, Producer,  # noqa: E402
                             TopicPartition)
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

TOPIC = "faults"
PARTITIONS = 3
GROUP = "faults-group"
TXN_TOPIC = "faults-txn"  # written only in transactions
TXN_ID = "faults-txn"  # one transactional id: a replacing producer fences the one before
SESSION_S = 2.0  # cluster.session_timeout of ClusterBroker's config
# replica.lag.time.max.ms of the brokers: a follower cut off this long leaves the ISR, so
# cut_brokers shrinks ISRs with cuts of seconds (Kafka's default is 30 s).
LAG_S = 5.0
KINDS = ("kill", "kill_wipe", "pause", "cut_brokers", "cut_etcd", "etcd_kill")
RECOVERY_S = 120


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


class FaultBroker(ClusterBroker):
    """A ClusterBroker whose etcd path and inter-broker address go through proxies."""

    def __init__(self, sluice, node, etcd_port):
        self.etcd_proxy = FaultProxy("127.0.0.1", etcd_port).start()
        super().__init__(sluice, node, f"http://127.0.0.1:{self.etcd_proxy.port}")
        self.ib_proxy = FaultProxy("127.0.0.1", self.port).start()
        self.paused = False

    def args(self, etcd=True):
        a = super().args(etcd) + ["--inter-broker-addr", f"127.0.0.1:{self.ib_proxy.port}"]
        with open(os.path.join(self.tmp, "sluice.yaml"), "a") as f:  # written by super()
            f.write(f"replica.lag.time.max.ms: {int(LAG_S * 1000)}\n")
        return a

    @property
    def pid(self):
        return self.proc.pid if self.proc is not None else None

    def restart(self, attempts=10):
        """Starts it again as a supervisor would: a broker whose data directory was wiped is
        a new incarnation, refused while its previous registration's lease lives ("node id
        N is in use", up to the session timeout after the kill); it is started again."""
        for attempt in range(attempts):
            try:
                self.start()
                return
            except TestFailure as e:
                if "is in use by" not in str(e) or attempt == attempts - 1:
                    raise
                time.sleep(1.0)

    def heal(self):
        self.etcd_proxy.heal()
        self.ib_proxy.heal()
        self.ib_proxy.isolate([])
        if self.paused and self.proc is not None:
            os.kill(self.proc.pid, signal.SIGCONT)
        self.paused = False

    def close(self):
        if self.paused and self.proc is not None:
            os.kill(self.proc.pid, signal.SIGCONT)
        self.cleanup()
        self.etcd_proxy.close()
        self.ib_proxy.close()


class Workload:
    """The clients: an idempotent producer thread, a transactional producer thread and a
    group consumer thread, each appending the history_checker events it saw to one list
    (under one lock, in the order they happened).
    """

    def __init__(self, bootstrap, seed, log_dir=None):
        self.bootstrap = bootstrap
        self.seed = seed
        # With a directory: the idempotent producers' librdkafka `eos` debug log goes to
        # producer-<name>.log there (its epoch bumps and the broker errors behind them:
        # 0018 "stalelead", the duplicates of seed 2121).
        self.log_dir = log_dir
        self.lock = threading.Lock()
        self.events = []  # guarded by lock
        self.errors = {}  # guarded by lock: delivery or commit error name -> count
        self.stopping = threading.Event()
        self.acked = 0
        self.consumed = 0
        self.producers = 0
        self.txns = {"committed": 0, "aborted": 0, "unknown": 0}
        self.threads = [threading.Thread(target=self._produce, name="producer", daemon=True),
                        threading.Thread(target=self._transact, name="txn", daemon=True),
                        threading.Thread(target=self._consume, name="consumer", daemon=True)]

    def start(self):
        for t in self.threads:
            t.start()

    def stop(self, timeout=180):
        self.stopping.set()
        for t in self.threads:
            t.join(timeout)
        check(not any(t.is_alive() for t in self.threads), "the clients did not stop")

    def _event(self, ev):
        with self.lock:
            self.events.append(ev)

    def _error(self, name):
        with self.lock:
            self.errors[name] = self.errors.get(name, 0) + 1

    def _produce(self):
        fatal = []

        def delivered(err, msg):
            if err is not None:
                self._error(f"produce {err.name()}")
                if err.fatal():
                    fatal.append(err)
                return
            self.acked += 1
            offset = msg.offset()
            if offset is None or offset < 0:  # acked with no offset (history_checker: -1)
                self._error("ack without an offset")
                offset = -1
            self._event({"type": "ack", "topic": msg.topic(), "partition": msg.partition(),
                         "offset": offset, "value": msg.value().decode()})

        while not self.stopping.is_set():
            self.producers += 1
            name = f"p{self.producers}"
            config = {"bootstrap.servers": self.bootstrap,
                      "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                      "message.timeout.ms": 60000, "log_level": 2,
                      "error_cb": lambda e: e.fatal() and fatal.append(e)}
            if self.log_dir is not None:
                logger = logging.getLogger(f"producer-{name}")
                logger.propagate = False
                handler = logging.FileHandler(os.path.join(self.log_dir, f"producer-{name}.log"))
                handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
                logger.addHandler(handler)
                logger.setLevel(logging.DEBUG)
                config.update({"debug": "eos", "log_level": 7, "logger": logger})
            producer = Producer(config)
            seq = 0
            while not self.stopping.is_set() and not fatal:
                for _ in range(5):
                    value = f"{name}:{seq}"
                    try:
                        producer.produce(TOPIC, value=value.encode(), partition=seq % PARTITIONS,
                                         on_delivery=delivered)
                        seq += 1
                    except BufferError:
                        break
                    except KafkaException as e:  # a fatal error: error_cb says which
                        fatal.append(e.args[0] if e.args else e)
                        break
                producer.poll(0)
                self.stopping.wait(0.02)  # about 250 records a second
            left = producer.flush(90)
            if left:
                self._error(f"produce left unflushed x{left}")
            if fatal:
                log(f"producer {name}: fatal error {fatal[0]}, a new producer takes over")
                self._error(f"producer fatal: {str(fatal[0])[:160]}")
                fatal.clear()

    def _transact(self):
        """A transactional producer writing TXN_TOPIC in transactions of one to four records
        over the partitions, each committed or aborted by a seeded choice (seven in ten
        commit), one "txn" event per transaction with its outcome. A producer whose error is
        fatal is replaced by a new one with the same transactional id (its
        InitProducerId fences the old one and completes its open transaction)."""
        rng = random.Random(self.seed)
        generation, n = 0, 0
        while not self.stopping.is_set():
            generation += 1
            producer = Producer({"bootstrap.servers": self.bootstrap,
                                 "transactional.id": TXN_ID, "linger.ms": 5,
                                 "transaction.timeout.ms": 60000, "log_level": 2})
            if self._txn_call(lambda: producer.init_transactions(30), "init") != "ok":
                continue
            while not self.stopping.is_set():
                n += 1
                tid = f"t{generation}:{n}"
                records = [(TXN_TOPIC, rng.randrange(PARTITIONS), f"{tid}:{i}")
                           for i in range(rng.randint(1, 4))]
                commit = rng.random() < 0.7
                outcome, records, usable = self._transaction(producer, tid, records, commit)
                if outcome is not None:
                    self._event({"type": "txn", "id": tid, "outcome": outcome,
                                 "records": [list(r) for r in records]})
                    self.txns[outcome] += 1
                if not usable:
                    break
                self.stopping.wait(0.1)

    def _txn_delivered(self, err, msg):
        if err is not None and err.code() != KafkaError._PURGE_QUEUE:  # purged by an abort
            log(f"transactional producer: delivery of {msg.value().decode()}: {err}")
            self._error(f"txn delivery {err.name()}")

    def _txn_call(self, call, what, attempts=5):
        """Calls a transactional API, again while its error is retriable: "ok" when it
        returned, "fatal" when the producer is unusable, "failed" otherwise (each error
        counted)."""
        for _ in range(attempts):
            try:
                call()
                return "ok"
            except KafkaException as e:
                err = e.args[0] if e.args and isinstance(e.args[0], KafkaError) else None
                name = err.name() if err is not None else _short(e)
                kind = what.split(" ")[0]
                if err is not None and err.fatal():
                    log(f"transactional producer: {what}: fatal error {err}")
                    self._error(f"txn producer fatal: {kind} {name}")
                    return "fatal"
                log(f"transactional producer: {what}: {err if err is not None else e}")
                self._error(f"txn {kind} {name}")
                if err is None or not err.retriable():
                    return "failed"
        return "failed"

    def _transaction(self, producer, tid, records, commit):
        """One transaction: (outcome or None when none began, the records produced in it,
        whether the producer can go on)."""
        if self._txn_call(producer.begin_transaction, f"begin {tid}", attempts=1) != "ok":
            return None, [], False
        sent = []
        for topic, partition, value in records:
            try:
                producer.produce(topic, value=value.encode(), partition=partition,
                                 on_delivery=self._txn_delivered)
                sent.append((topic, partition, value))
            except (BufferError, KafkaException) as e:
                log(f"transactional producer: produce in {tid}: {e}")
                self._error(f"txn produce {_short(e)}")
                commit = False
                break
            producer.poll(0)
        if commit:
            done = self._txn_call(lambda: producer.commit_transaction(30), f"commit {tid}")
            if done == "ok":
                return "committed", sent, True
            if done == "fatal":
                return "unknown", sent, False
        else:
            producer.flush(30)  # the records written, so the abort has something to undo
        # Never asked to commit: the coordinator can only abort it, whatever happens next.
        # A commit that raised is settled by an acknowledged abort, or unknown without one.
        if self._txn_call(lambda: producer.abort_transaction(30),
                          f"abort {tid}{' after a failed commit' if commit else ''}") == "ok":
            return "aborted", sent, True
        return ("unknown" if commit else "aborted"), sent, False

    def _consume(self):
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": GROUP,
                      "enable.auto.commit": False, "auto.offset.reset": "earliest",
                      "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000,
                      "log_level": 2})
        c.subscribe([TOPIC])
        last_commit = time.monotonic()
        try:
            while not self.stopping.is_set():
                m = c.poll(0.2)
                if m is not None and not m.error():
                    self.consumed += 1
                if time.monotonic() - last_commit >= 1.0:
                    last_commit = time.monotonic()
                    self._commit(c)
            self._commit(c)
        finally:
            c.close()

    def _commit(self, c):
        """Commits the position synchronously, then reads the committed offsets back."""
        try:
            assigned = c.assignment()
            if not assigned:
                return
            done = c.commit(asynchronous=False)
        except Exception as e:  # KafkaException: the coordinator moved, a rebalance
            if "NO_OFFSET" not in str(e):
                self._error(f"commit {_short(e)}")
            done = None
        for tp in done or ():
            if tp.error is None and tp.offset >= 0:
                self._event({"type": "commit", "group": GROUP, "topic": tp.topic,
                             "partition": tp.partition, "offset": tp.offset})
        try:
            seen = c.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=5)
        except Exception as e:
            self._error(f"offsetfetch {_short(e)}")
            return
        for tp in seen:
            if tp.error is None:
                self._event({"type": "commit", "group": GROUP, "topic": tp.topic,
                             "partition": tp.partition, "offset": max(tp.offset, -1)})


def _short(e):
    text = str(e)
    m = re.search(r'name="([A-Z_]+)"', text) or re.search(r"\b(_?[A-Z][A-Z_]{5,})\b", text)
    return m.group(1) if m else text[:60]


class Run:
    """The cluster under test (etcd, three FaultBrokers and their proxies) and the seeded
    faults. Made by main(), then start() once, inject() per fault, heal_all(), the final
    reads, and close() always; used from main's thread only (the clients have their own)."""

    def __init__(self, sluice, seed, faults, work):
        self.sluice, self.seed, self.faults, self.work = sluice, seed, faults, work
        self.rng = random.Random(seed)
        self.etcd = EtcdCluster().start()
        self.brokers = [FaultBroker(sluice, n, self.etcd.client_ports[0]) for n in (1, 2, 3)]
        self.by_node = {b.node: b for b in self.brokers}
        self.done = []  # (index, kind, description)
        self.recoveries = []  # (seconds from the heal to the cluster whole, index, kind)

    # ---- the cluster

    def live(self):
        return [b for b in self.brokers if b.proc is not None and not b.paused]

    def md(self):
        for b in self.live():
            try:
                return metadata(b.bootstrap)
            except Exception:
                continue
        return None

    def etcd_leaders_now(self):
        """{(topic, partition): leader} when etcd holds every broker registered and every
        partition of every topic (the coordinators' internal ones too) led with an ISR of
        three of the current registrations' incarnations; else None."""
        def ranged(prefix):  # {node: (value, create_revision, mod_revision)}
            r = self.etcd.call("kv/range", {"key": b64(prefix), "range_end": b64(prefix_end(prefix))})
            return {int(unb64(kv["key"]).decode().rsplit("/", 1)[1]):
                    (json.loads(unb64(kv["value"])), int(kv["create_revision"]),
                     int(kv["mod_revision"])) for kv in r.get("kvs", [])}
        try:
            held = ranged(b"/sluice/sluice/brokers/")
            handled = ranged(b"/sluice/sluice/incarnations/")
            regs = {node: v for node, (v, _, _) in held.items()}
            states = {}
            for k, v in self.etcd.get_prefix(b"/sluice/sluice/partitions/").items():
                topic, p = k.decode().rsplit("/", 2)[1:]
                states[(topic, int(p))] = json.loads(v)
        except Exception:  # etcd down or answering errors
            return None
        if set(regs) != set(self.by_node):
            return None
        for topic in (TOPIC, TXN_TOPIC):
            if sum(1 for t, _ in states if t == topic) != PARTITIONS:
                return None
        # Every registration handled by the controller (an unclean or new one has left the
        # ISRs and been recorded), so no ISR change is still to come from it.
        for node, (v, created, _) in held.items():
            inc = handled.get(node)
            if inc is None or inc[0].get("incarnation") != v.get("incarnation"):
                return None
            if not v.get("clean", True) and inc[2] < created:
                return None
        for st in states.values():
            isr = {node: inc for node, inc in st.get("isr", [])}
            if st.get("leader", -1) not in regs or len(isr) != 3:
                return None
            if any(regs[node].get("incarnation") != inc for node, inc in isr.items()):
                return None
        return {tp: st["leader"] for tp, st in states.items()}

    def recovered(self):
        """Every broker registered and every partition led with an ISR of three in etcd, and
        each broker's own Metadata saying the same leaders (a broker whose lease was lost
        still answers from its old view)."""
        leaders = self.etcd_leaders_now()
        if leaders is None:
            return False
        for b in self.brokers:
            try:
                m = metadata(b.bootstrap)
            except Exception:
                return False
            if len(m.brokers) != 3:
                return False
            for topic in (TOPIC, TXN_TOPIC):
                if topic not in m.topics:
                    return False
                parts = m.topics[topic].partitions
                if len(parts) != PARTITIONS or any(p.leader < 0 for p in parts.values()):
                    return False
                if any(len(i) != 3 for i in isr_of(m, topic).values()):
                    return False
                if leaders_of(m, topic) != {p: leaders[(topic, p)] for p in range(PARTITIONS)}:
                    return False
        return True

    def wait_recovered(self, what):
        wait_until(self.recovered, RECOVERY_S, f"the cluster whole again after {what}",
                   interval=0.5)

    def leader_of(self, partition):
        def ask():
            m = self.md()
            if m is None or TOPIC not in m.topics:
                return None
            node = leaders_of(m, TOPIC).get(partition, -1)
            return node if node in self.by_node else None
        return wait_until(ask, 60, f"a leader of {TOPIC}-{partition}", interval=0.2)

    def start(self):
        for b in self.brokers:
            b.spawn()
        for b in self.brokers:
            b.wait_listening()
        wait_until(lambda: (m := self.md()) is not None and len(m.brokers) == 3, 60,
                   "three brokers registered", interval=0.2)
        admin = AdminClient({"bootstrap.servers": self.brokers[0].bootstrap})
        todo = [TOPIC, TXN_TOPIC]
        for attempt in range(1, 4):
            fs = admin.create_topics([NewTopic(t, PARTITIONS, 3,
                                               config={"min.insync.replicas": "2"})
                                      for t in todo], operation_timeout=10)
            why = None
            for t in list(todo):
                try:
                    fs[t].result(30)
                    todo.remove(t)
                except KafkaException as e:
                    if e.args and e.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                        todo.remove(t)
                    else:
                        why = f"{t}: {e}"
                except Exception as e:  # concurrent.futures.TimeoutError
                    why = f"{t}: no answer in 30 s ({type(e).__name__})"
            if not todo:
                break
            controllers = []
            for b in self.brokers:
                try:
                    controllers.append(metadata(b.bootstrap).controller_id)
                except Exception as e:
                    controllers.append(str(e)[:40])
            log(f"CreateTopics attempt {attempt}: {why}; controller per broker {controllers}")
            check(attempt < 3, f"CreateTopics: {why}")
        self.wait_recovered("the topic's creation")

    # ---- faults

    def plan(self):
        """Each kind once per round of six, in a seeded order: a short run covers every
        kind, a long one stays balanced."""
        kinds = []
        while len(kinds) < self.faults:
            rnd = list(KINDS)
            self.rng.shuffle(rnd)
            kinds += rnd
        return kinds[:self.faults]

    def target(self):
        """The broker a fault hits and what it is: the leader of a random partition of
        TOPIC six times in ten, else the broker FindCoordinator names for the group or for
        the transactional id (the coordinators' partitions' leaders)."""
        partition = self.rng.randrange(PARTITIONS)
        pick = self.rng.random()
        if pick < 0.6:
            return self.by_node[self.leader_of(partition)], f"leader of {TOPIC}-{partition}"
        key, key_type, role = ((GROUP, 0, "group coordinator") if pick < 0.8 else
                               (TXN_ID, 1, "transaction coordinator"))

        def ask():
            for b in self.live():
                try:
                    error, node = find_coordinator(b.bootstrap, key, key_type)
                except OSError:
                    continue
                if error == 0 and node in self.by_node:
                    return node
            return None
        return self.by_node[wait_until(ask, 60, f"the {role}", interval=0.2)], role

    def inject(self, index, kind):
        rng = self.rng
        leader, role = self.target()
        if kind in ("kill", "kill_wipe"):
            down = rng.uniform(0.5, 5.0)
            what = f"SIGKILL broker {leader.node} ({role}), " \
                   f"{'data wiped, ' if kind == 'kill_wipe' else ''}restart after {down:.1f}s"
            log(f"fault {index}: {what}")
            leader.kill()
            if kind == "kill_wipe":
                shutil.rmtree(leader.data_dir, ignore_errors=True)
            time.sleep(down)
            leader.restart()
        elif kind == "pause":
            held = SESSION_S + rng.uniform(0.5, 4.0)
            what = f"SIGSTOP broker {leader.node} ({role}) for {held:.1f}s"
            log(f"fault {index}: {what}")
            os.kill(leader.pid, signal.SIGSTOP)
            leader.paused = True
            time.sleep(held)
            os.kill(leader.pid, signal.SIGCONT)
            leader.paused = False
        elif kind == "cut_brokers":
            other = rng.choice([b for b in self.brokers if b is not leader])
            mode = rng.choice(("cut", "blackhole"))
            # Four times in ten past replica.lag.time.max.ms, so the ISR shrinks (and grows
            # back after the heal); else shorter than it.
            held = (rng.uniform(LAG_S + 1.0, LAG_S + 8.0) if rng.random() < 0.4
                    else rng.uniform(1.0, LAG_S - 1.0))
            what = (f"{mode} between brokers {leader.node} ({role}) "
                    f"and {other.node} for {held:.1f}s")
            log(f"fault {index}: {what}")
            leader.ib_proxy.isolate([other.pid], mode)
            other.ib_proxy.isolate([leader.pid], mode)
            time.sleep(held)
            leader.ib_proxy.isolate([])
            other.ib_proxy.isolate([])
        elif kind == "cut_etcd":
            mode = rng.choice(("cut", "hold"))
            held = rng.uniform(1.0, 6.0)
            what = f"{mode} broker {leader.node}'s ({role}) path to etcd for {held:.1f}s"
            log(f"fault {index}: {what}")
            leader.etcd_proxy.set_mode(mode)
            time.sleep(held)
            leader.etcd_proxy.heal()
        elif kind == "etcd_kill":
            down = rng.uniform(0.5, 5.0)
            what = f"SIGKILL etcd, restart after {down:.1f}s"
            log(f"fault {index}: {what}")
            self.etcd.kill(0)
            time.sleep(down)
            self.etcd.restart(0)
        else:
            raise ValueError(kind)
        self.done.append((index, kind, what))
        gap = rng.uniform(0.5, 2.0)
        healed = time.monotonic()
        self.wait_recovered(f"fault {index} ({what})")
        self.recoveries.append((time.monotonic() - healed, index, kind))
        time.sleep(gap)

    def heal_all(self):
        if not self.etcd.running(0):
            self.etcd.restart(0)
        for b in self.brokers:
            b.heal()
        for b in self.brokers:
            if b.proc is None:
                b.restart()

    # ---- the final read

    def final_read(self):
        """Every partition of TOPIC from its start to its high watermark through a consumer
        (cluster_replication_test.read_all), each batch's leader epoch through raw Fetch,
        and TXN_TOPIC read_committed: read events, {partition: [(base, last, epoch)]} and
        {(topic, partition): end}."""
        bootstrap = ",".join(b.bootstrap for b in self.brokers)
        events = read_all(bootstrap, TOPIC, PARTITIONS)
        highs = {(TOPIC, e["partition"]): e["offset"] for e in events if e["type"] == "end"}
        batches = {}
        for p in range(PARTITIONS):
            leader = self.by_node[self.leader_of(p)]
            batches[p] = fetch_batch_epochs(leader.bootstrap, TOPIC, p, 0, highs[(TOPIC, p)])
        committed = read_committed_all(bootstrap, TXN_TOPIC, PARTITIONS)
        highs.update({(TXN_TOPIC, e["partition"]): e["offset"]
                      for e in committed if e["type"] == "end"})
        return events + committed, batches, highs

    def leader_claims(self):
        """Each broker's own word of the leaderships it took, from its logs."""
        pattern = re.compile(r"(\S+)-(\d+): leader in epoch (\d+) from offset")
        claims = set()
        for b in self.brokers:
            for name in os.listdir(b.tmp):
                if not name.startswith(("out.", "err.")):
                    continue
                with open(os.path.join(b.tmp, name), errors="replace") as f:
                    for m in pattern.finditer(f.read()):
                        claims.add((m.group(1), int(m.group(2)), int(m.group(3)), b.node))
        return [{"type": "leader", "topic": t, "partition": p, "epoch": e, "node": n}
                for t, p, e, n in sorted(claims)]

    def compare_replicas(self, high_watermarks):
        """Once the clients stopped and every follower caught up: each broker's copy of each
        partition (its segment files, batch by batch) the same as every other's below the
        high watermark. Returns the differences found."""
        def caught_up():
            ends = {}
            for tp in high_watermarks:
                for b in self.brokers:
                    got = local_batches(b.data_dir, *tp)
                    ends.setdefault(tp, set()).add(got[-1][1] + 1 if got else 0)
            return all(len(e) == 1 for e in ends.values())
        try:
            wait_until(caught_up, 60, "every replica at the same log end", interval=0.5)
        except TestFailure as e:
            return [str(e)]
        problems = []
        for (topic, p), hw in sorted(high_watermarks.items()):
            copies = {b.node: [x for x in local_batches(b.data_dir, topic, p) if x[0] < hw]
                      for b in self.brokers}
            first = self.brokers[0].node
            for node, batches in copies.items():
                if batches != copies[first]:
                    diff = next((i for i, (x, y) in enumerate(zip(batches, copies[first]))
                                 if x != y), min(len(batches), len(copies[first])))
                    problems.append(
                        f"{topic}-{p}: broker {node}'s copy differs from broker {first}'s at "
                        f"batch {diff} ({batches[diff:diff + 1]} vs {copies[first][diff:diff + 1]})")
        return problems

    def etcd_leaders(self):
        """Every (topic, partition, epoch, leader) etcd ever held: its whole history of
        partitions/<topic>/<p> read by a watch from revision 1 (sluice never compacts)."""
        prefix = b"/sluice/sluice/partitions/"
        now = self.etcd.call("kv/range", {"key": b64(prefix), "range_end": b64(prefix_end(prefix))})
        last = max((int(kv["mod_revision"]) for kv in now.get("kvs", [])), default=0)
        body = {"create_request": {"key": b64(prefix), "range_end": b64(prefix_end(prefix)),
                                   "start_revision": "1"}}
        req = urllib.request.Request(self.etcd.endpoint(0) + "/v3/watch",
                                     data=json.dumps(body).encode())
        out, seen = set(), 0
        with urllib.request.urlopen(req, timeout=30) as r:
            for line in r:
                msg = json.loads(line).get("result", {})
                for ev in msg.get("events", []):
                    kv = ev["kv"]
                    seen = max(seen, int(kv.get("mod_revision", 0)))
                    if ev.get("type") == "DELETE" or not kv.get("value"):
                        continue
                    t, p = unb64(kv["key"]).decode().rsplit("/", 2)[1:]
                    v = json.loads(unb64(kv["value"]))
                    if v.get("leader", -1) >= 0:
                        out.add((t, int(p), int(v.get("leader_epoch", 0)), int(v["leader"])))
                if seen >= last:
                    break
        return [{"type": "leader", "topic": t, "partition": p, "epoch": e, "node": n}
                for t, p, e, n in sorted(out)]

    def close(self, keep):
        for b in self.brokers:
            if keep:
                dest = os.path.join(keep, f"broker{b.node}")
                os.makedirs(dest, exist_ok=True)
                names = os.listdir(b.tmp) if os.path.isdir(b.tmp) else []
                for name in names:
                    if name.startswith(("out.", "err.")):
                        shutil.copy(os.path.join(b.tmp, name), dest)
                # The data directory too (segments, leader-epoch-checkpoint): what a
                # duplicate or a replica that never catches up is read from.
                try:
                    shutil.copytree(b.data_dir, os.path.join(dest, "data"), dirs_exist_ok=True)
                except (OSError, shutil.Error) as e:  # wiped, or a file gone mid-copy
                    log(f"copying broker {b.node}'s data directory: {e}"[:200])
            b.close()
        if keep:
            try:
                shutil.copy(os.path.join(self.etcd.base_dir, "m0.log"), keep)
            except OSError:
                pass
        self.etcd.close()


def read_committed_all(bootstrap, topic, partitions, timeout=150):
    """Every partition of `topic` read_committed from its start until the consumer's
    position reaches the high watermark (so every transaction in it was decided: the last
    stable offset caught up), as read and end events."""
    hw = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader-hw",
                   "enable.auto.commit": False, "isolation.level": "read_uncommitted"})
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader-rc",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed"})
    events = []
    try:
        for p in range(partitions):
            tp = TopicPartition(topic, p)
            low, high = wait_until(lambda: _watermarks(hw, tp), 60,
                                   f"watermarks of {topic}-{p}", interval=0.5)
            c.assign([TopicPartition(topic, p, low)])
            position = low
            deadline = time.monotonic() + timeout
            while position < high and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is not None and not m.error():
                    events.append({"type": "read", "topic": topic, "partition": p,
                                   "offset": m.offset(), "value": m.value().decode()})
                at = c.position([tp])[0].offset
                position = max(position, at if at is not None else -1)
            check(position >= high, f"{topic}-{p}: read_committed reached {position} of the "
                  f"high watermark {high} in {timeout}s (a transaction left undecided?)")
            events.append({"type": "end", "topic": topic, "partition": p, "offset": position})
            c.unassign()
    finally:
        c.close()
        hw.close()
    return events


def fetch_batch_epochs(bootstrap, topic, partition, start, end):
    """[(base offset, last offset, partition leader epoch)] of the batches in [start, end),
    read with Fetch v4 (read_uncommitted), the batch headers parsed here."""
    out, offset = [], start
    host, port = bootstrap.rsplit(":", 1)
    name = struct.pack(">h", len(topic)) + topic.encode()
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        corr = 0
        while offset < end:
            corr += 1
            body = (struct.pack(">iiiib", -1, 500, 1, 4 << 20, 0) + struct.pack(">i", 1) + name
                    + struct.pack(">iiqi", 1, partition, offset, 4 << 20))
            sock.sendall(_frame(1, 4, corr, body, flexible=False))
            size = struct.unpack(">i", _recv_exact(sock, 4))[0]
            data = _recv_exact(sock, size)
            check(struct.unpack(">i", data[:4])[0] == corr, "Fetch correlation id")
            at = 4 + 4 + 4  # correlation id, throttle, topics count
            n = struct.unpack(">h", data[at:at + 2])[0]
            at += 2 + n + 4  # name, partitions count
            _, err, _hw, _lso = struct.unpack(">ihqq", data[at:at + 22])
            at += 22
            check(err == 0, f"Fetch {topic}-{partition} at {offset}: error {err}")
            aborted = struct.unpack(">i", data[at:at + 4])[0]
            at += 4 + max(aborted, 0) * 16
            rlen = struct.unpack(">i", data[at:at + 4])[0]
            got = parse_batches(data[at + 4:at + 4 + max(rlen, 0)], offset)
            check(got, f"Fetch {topic}-{partition} at {offset}: no whole batch")
            out += [(base, last, epoch) for base, last, epoch, _ in got]
            offset = got[-1][1] + 1
    return out


def parse_batches(records, start=0):
    """[(base offset, last offset, partition leader epoch, crc)] of the whole v2 batches in
    `records` ending past `start`."""
    out, pos = [], 0
    while pos + 61 <= len(records):
        base, blen, epoch = struct.unpack(">qii", records[pos:pos + 16])
        if blen < 49 or pos + 12 + blen > len(records):
            break  # a partial batch at the end (of an answer, or a file being written)
        crc, _attrs, delta = struct.unpack(">Ihi", records[pos + 17:pos + 27])
        if base + delta >= start:
            out.append((base, base + delta, epoch, crc))
        pos += 12 + blen
    return out


def local_batches(data_dir, topic, partition):
    """The batches of a replica's segment files (Kafka's <base offset>.log), in order."""
    d = os.path.join(data_dir, f"{topic}-{partition}")
    try:
        names = sorted(n for n in os.listdir(d) if n.endswith(".log"))
    except OSError:
        return []
    out = []
    for n in names:
        try:
            with open(os.path.join(d, n), "rb") as f:
                out += parse_batches(f.read())
        except OSError:
            pass
    return out


def batch_producer_at(data_dir, topic, partition, offset):
    """(leader epoch, producer id, producer epoch, base sequence, base offset) of the batch
    holding `offset` in a replica's segment files, or None: what tells a duplicate the
    broker let through from one a client sent again under a new producer epoch."""
    d = os.path.join(data_dir, f"{topic}-{partition}")
    try:
        names = sorted(n for n in os.listdir(d) if n.endswith(".log"))
    except OSError:
        return None
    for n in names:
        try:
            with open(os.path.join(d, n), "rb") as f:
                data = f.read()
        except OSError:
            continue
        pos = 0
        while pos + 61 <= len(data):
            base, blen, epoch = struct.unpack(">qii", data[pos:pos + 16])
            if blen < 49 or pos + 12 + blen > len(data):
                break
            delta = struct.unpack(">i", data[pos + 23:pos + 27])[0]
            if base <= offset <= base + delta:
                pid, pepoch, seq = struct.unpack(">qhi", data[pos + 43:pos + 57])
                return epoch, pid, pepoch, seq, base
            pos += 12 + blen
    return None


def epoch_at(batches, offset):
    for base, last, epoch in batches:
        if base <= offset <= last:
            return epoch
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sluice")
    ap.add_argument("--faults", type=int, default=6)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--offsets-not-replicated", action="store_true",
                    help="committed offsets gone, or older, when the group coordinator moves "
                    "are printed as a known gap, not failed: FindCoordinator names the "
                    "controller, whose own __consumer_offsets is not replicated, until "
                    "0018's phase D (a controller that returns answers its old commits)")
    ap.add_argument("--keep", help="a directory for the history and the brokers' logs "
                    "(kept on failure in a temporary one anyway)")
    args = ap.parse_args()
    why = unavailable()
    if why:
        print(f"SKIP: {why}")
        return 0
    # SIGTERM (a timeout, an operator) ends the run through its cleanup: no orphan brokers.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    replay = f"cluster_faults.py {args.sluice} --faults {args.faults} --seed {seed}"
    print(f"seed: {seed} (replay: {replay})", flush=True)
    # The brokers' directories under a root of this run's own, named so that nothing
    # clearing /tmp/sluice-* behind another test removes them mid-run (it happened).
    root = tempfile.mkdtemp(prefix="faultrun-")
    tempfile.tempdir = root
    work = args.keep or tempfile.mkdtemp(prefix="history-")
    os.makedirs(work, exist_ok=True)
    run = Run(args.sluice, seed, args.faults, work)
    failures = []
    workload = None
    report = None
    try:
        run.start()
        workload = Workload(",".join(b.bootstrap for b in run.brokers), seed, log_dir=work)
        workload.start()
        time.sleep(2)
        for i, kind in enumerate(run.plan(), 1):
            try:
                run.inject(i, kind)
            except TestFailure as e:
                failures.append(f"fault {i} ({kind}): {e}")
                break
        log(f"{len(run.done)} faults done; healing everything")
        if run.recoveries:
            times = sorted(t for t, _, _ in run.recoveries)
            slowest = max(run.recoveries)
            log(f"whole again after each heal: median {times[len(times) // 2]:.1f}s, slowest "
                f"{slowest[0]:.1f}s (fault {slowest[1]}, {slowest[2]})")
        run.heal_all()
        try:
            run.wait_recovered("the final heal")
        except TestFailure as e:
            failures.append(str(e))
        time.sleep(2)
        workload.stop()
        log(f"clients stopped: {workload.acked} acknowledged, {workload.consumed} consumed, "
            f"{workload.producers} producer(s); transactions {workload.txns}; "
            f"errors {workload.errors}")
        reads, batches, highs = run.final_read()
        failures += [f"diverged: {d}" for d in run.compare_replicas(highs)]
        history = list(workload.events)
        unknown = 0
        for ev in history:
            if ev["type"] == "ack" and ev["offset"] >= 0:
                e = epoch_at(batches.get(ev["partition"], []), ev["offset"])
                if e is not None:
                    ev["epoch"] = e
                else:
                    unknown += 1
        claims, elected = run.leader_claims(), run.etcd_leaders()
        # Both kinds of leader event: what each broker says it led, what etcd elected; one
        # leader per partition and epoch across them.
        history += reads + claims + elected
        path = os.path.join(work, "history.jsonl")
        with open(path, "w") as f:
            for ev in history:
                f.write(json.dumps(ev) + "\n")
        report = history_checker.check(history)
        commits = sum(1 for e in history if e["type"] == "commit")
        log(f"history: {report.acked} acknowledged ({unknown} without a batch read back), "
            f"{report.read} read back, {commits} commits observed, "
            f"{len(claims)} leaderships claimed by brokers, {len(elected)} elected in etcd, "
            f"{len(report.violations)} violations")
        known = [v for v in report.violations
                 if args.offsets_not_replicated and v[0] in ("vanished", "backwards")]
        for kind, msg in known[:20]:
            log(f"known gap (--offsets-not-replicated): {kind}: {msg}")
        for kind, msg in [v for v in report.violations if v not in known][:100]:
            failures.append(f"{kind}: {msg}")
            if kind == "duplicate":  # whose batches: same producer epoch, or a new one?
                for t, p, o in re.findall(r"(\S+)-(\d+)@(\d+)", msg):
                    found = next((x for b in run.brokers if (x := batch_producer_at(
                        b.data_dir, t, int(p), int(o))) is not None), None)
                    failures.append(f"  {t}-{p}@{o}: batch (leader epoch, producer id, "
                                    f"producer epoch, base sequence, base offset) {found}")
        # The clients carry on by themselves: a producer's fatal error (librdkafka
        # gives up on its idempotent state) is a failure of the cluster too.
        for name, n in sorted(workload.errors.items()):
            if name.startswith(("producer fatal", "txn producer fatal")):
                failures.append(f"client: {name} (x{n})")
        check(report.acked > 0, "nothing was acknowledged")
        check(workload.txns["committed"] > 0, "no transaction was committed")
        check(workload.consumed > 0, "the group consumed nothing")
        check(commits > 0, "no committed offset was observed")
    except Exception as e:  # the verdict: any exception fails the run
        import traceback
        traceback.print_exc()
        failures.append(f"{type(e).__name__}: {e}")
    finally:
        if workload is not None and not workload.stopping.is_set():
            workload.stopping.set()
        keep = work if failures or args.keep else None
        run.close(keep)
        if failures and not args.keep:
            root = None  # the history and logs were kept in it
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)
    if failures:
        print(f"FAIL: cluster_faults seed {seed}, {len(run.done)} faults:")
        for f in failures:
            print(f"  {f}")
        print(f"history, logs and data directories kept in {work}; replay: {replay}")
        return 1
    print(f"PASS: cluster_faults seed {seed}: {len(run.done)} faults "
          f"({', '.join(sorted({k for _, k, _ in run.done}))}), 0 violations"
          + (f" ({len(report.violations)} of the known gap printed above)"
             if report is not None and report.violations else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
