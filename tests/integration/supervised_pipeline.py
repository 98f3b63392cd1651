"""What the lake fault tests (s3_faults_test.py, rest_catalog_faults_test.py) share: the
events, `sluice pipeline run` as a child process, the group's committed offsets read by a
consumer that never joins it, and a supervisor that starts a pipeline again whenever it
exits until its group's commit reaches the topic's ends, checking all along that the
group is never ahead of the table (the exactly-once rule of the iceberg sink)."""

import itertools
import os
import re
import signal
import subprocess
import time

from sluice_broker import TestFailure, check

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 4
CITIES = ["Paris", "Lyon", "Oslo", "Lima", "Kyoto"]
_run_numbers = itertools.count(1)  # names the runs' logs (supervisors may run at once)


def event(n):
    return {"id": n, "city": CITIES[n % len(CITIES)], "amount": n * 0.5}


def create_topic(bootstrap, topic, partitions=PARTITIONS):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, num_partitions=partitions,
                                           replication_factor=1)]).values():
        f.result(timeout=30)


class Committed:
    """The group's committed offsets, read by a consumer that never joins it."""

    def __init__(self, bootstrap, group, topic):
        self.topic = topic
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "enable.auto.commit": False})

    def get(self):
        tps = self.consumer.committed([TopicPartition(self.topic, p) for p in range(PARTITIONS)],
                                      timeout=20)
        return [max(tp.offset, 0) for tp in tps]

    def close(self):
        self.consumer.close()


class Pipeline:
    """One `sluice pipeline run` process, its output in a file; `env`: variables added to
    the test's environment (TMPDIR, the staging directory, is the log's directory)."""

    def __init__(self, sluice, path, log_path, env=None):
        e = dict(os.environ)
        e["TMPDIR"] = os.path.dirname(log_path)
        e.update(env or {})
        self.log_path = log_path
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen([sluice, "pipeline", "run", path, "--no-progress"],
                                     stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=e)

    def output(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def running(self):
        return self.proc.poll() is None

    def stop(self, timeout=90):
        """SIGTERM: the exit status; a hang past `timeout` is a failure."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise TestFailure(f"the pipeline did not stop within {timeout} s of SIGTERM:\n" +
                              self.output()[-3000:])
        finally:
            self.log.close()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.log.close()


def final_errors(text):
    """The lines `sluice pipeline run` ends with when it fails."""
    return [l for l in text.splitlines() if l.startswith("sluice pipeline run:")]


def last_error(text):
    lines = final_errors(text) or [l for l in text.splitlines()
                                   if re.search(r"error|fail|refus", l, re.I)]
    return lines[-1][:400] if lines else (text.strip().splitlines() or ["(no output)"])[-1][:400]


def supervise(ctx, spec, ends, what, held, env=None, on_exit=None, max_starts=25,
              progress_timeout=120):
    """Runs the pipeline of `spec` (path, name, group, topic), starting it again whenever it
    exits, until the group's commit reaches `ends`; then stops it (SIGTERM). Whenever the
    group's commit moves it must not be ahead of `held(spec)`, the table's offsets. A run
    that exits by itself is given to `on_exit(what, n, rc, output)` (which may fail the
    test). Returns the outputs of the runs."""
    outputs = []
    committed = Committed(ctx.bootstrap, spec["group"], spec["topic"])
    try:
        while True:
            check(len(outputs) < max_starts,
                  f"{what}: the pipeline exited {max_starts} times without reaching the end")
            log = os.path.join(ctx.tmp, f"{spec['name']}-{next(_run_numbers)}.log")
            run = Pipeline(ctx.sluice, spec["path"], log, env)
            try:
                if _watch_run(spec, ends, what, held, on_exit, run, committed, outputs,
                              progress_timeout):
                    return outputs
            finally:
                if run.running():
                    run.kill()
    finally:
        committed.close()


def _watch_run(spec, ends, what, held, on_exit, run, committed, outputs, progress_timeout):
    """Watches one run of supervise(): True when it reached the end (and was stopped),
    False when it exited by itself."""
    last, last_change = None, time.monotonic()
    while True:
        now = committed.get()
        if now != last:
            last, last_change = now, time.monotonic()
            table = held(spec)
            check(all(now[p] <= table[p] for p in range(PARTITIONS)),
                  f"{what}: the group committed {now}, ahead of the table's {table}")
        if now == ends:
            rc = run.stop()
            out = run.output()
            outputs.append(out)
            print(f"{what}: run {len(outputs)} reached the end; SIGTERM -> exit {rc}"
                  + ("" if rc == 0 else f" ({last_error(out)})"), flush=True)
            return True
        if not run.running():
            out = run.output()
            outputs.append(out)
            run.kill()
            rc = run.proc.returncode
            print(f"{what}: run {len(outputs)} exited {rc} at {now}: {last_error(out)}",
                  flush=True)
            if on_exit:
                on_exit(what, len(outputs), rc, out)
            return False
        if time.monotonic() - last_change > progress_timeout:
            out = run.output()
            run.kill()
            raise TestFailure(f"{what}: no progress for {progress_timeout} s at {now} "
                              f"of {ends} (a hang?):\n{out[-4000:]}")
        time.sleep(0.3)
