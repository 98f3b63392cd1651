#!/usr/bin/python3
"""The Debian package as a user installs and runs it (issue 30, docs/install.md).

scripts/make-deb.sh builds sluice and sluice-dbgsym; the test checks their control files
(every Depends satisfied by this machine's packages), installs sluice with dpkg into a
fresh root (--force-script-chrootless: the postinst makes the sluice user and
/var/lib/sluice there), and runs the unit's ExecStart from that root as systemd would:
with NOTIFY_SOCKET (READY=1 must come), the installed config (its paths and ports moved
into a temporary directory) and log.format json (every line must be a JSON object). Kafka
with kcat, SQL with psql, /readyz, /metrics' sluice_build_info, SIGHUP (RELOADING=1 then
READY=1, log.level read again, a changed port named as waiting for a restart) and SIGTERM
(STOPPING=1, exit 0). /proc/PID/maps must show nothing of the source tree or the build
directory: libduckdb.so comes from the installed tree. The installed tree copied elsewhere
still runs; `--check-config` passes the shipped config with every `# key: value` line
uncommented and refuses bad ones; dpkg removes and purges the package, keeping the data.

usage: package_test.py path/to/build/sluice
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

SLUICE = os.path.abspath(sys.argv[1])
BUILD = os.path.dirname(SLUICE)
SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(cmd, check=True, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        fail(f"{cmd} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return r


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def check_packages(out):
    debs = sorted(f for f in os.listdir(out) if f.endswith(".deb"))
    main = [f for f in debs if f.startswith("sluice_")]
    dbg = [f for f in debs if f.startswith("sluice-dbgsym_")]
    if len(main) != 1 or len(dbg) != 1:
        fail(f"make-deb made {debs}")
    deb, dbgdeb = os.path.join(out, main[0]), os.path.join(out, dbg[0])
    fields = {}
    for line in run(["dpkg-deb", "-f", deb]).stdout.splitlines():
        if ": " in line and not line.startswith(" "):
            k, v = line.split(": ", 1)
            fields[k] = v
    for k in ("Package", "Version", "Architecture", "Depends", "Installed-Size", "Description"):
        if k not in fields:
            fail(f"control has no {k}: {fields}")
    commit = re.search(r"^commit (\S+)", run([SLUICE, "version"]).stdout, re.M).group(1)
    if commit.replace("-dirty", ".dirty") not in fields["Version"]:
        fail(f"version {fields['Version']} does not name commit {commit}")
    # Every dependency is a Debian package this machine has, at a version it satisfies.
    deps = [d.strip() for d in fields["Depends"].split(",")]
    for lib in ("libc6", "librdkafka1", "libpq5", "libssl3", "libstdc++6"):
        if not any(d.startswith(lib + " ") for d in deps):
            fail(f"Depends lacks {lib}: {deps}")
    for d in deps:
        m = re.fullmatch(r"(\S+)(?: \(>= (\S+)\))?", d)
        if not m:
            fail(f"Depends entry {d!r}")
        have = run(["dpkg-query", "-W", "-f=${Version}", m.group(1)], check=False).stdout
        if not have:
            fail(f"{m.group(1)} is not installed here")
        if m.group(2):
            run(["dpkg", "--compare-versions", have, "ge", m.group(2)])
    files = run(["dpkg-deb", "-c", deb]).stdout
    for path in ("./usr/bin/sluice", "./usr/lib/sluice/libduckdb.so",
                 "./usr/lib/systemd/system/sluice.service", "./etc/sluice/sluice.yaml",
                 "./usr/share/doc/sluice/install.md"):
        if not re.search(re.escape(path) + r"$", files, re.M):
            fail(f"{path} is not in the package:\n{files}")
    if "/lib/debug/" in files:
        fail("debug information in the main package")
    if run(["dpkg-deb", "-I", deb, "conffiles"]).stdout.split() != ["/etc/sluice/sluice.yaml"]:
        fail("conffiles is not /etc/sluice/sluice.yaml")
    dbg_fields = run(["dpkg-deb", "-f", dbgdeb, "Depends", "Build-Ids"]).stdout
    if f"sluice (= {fields['Version']})" not in dbg_fields:
        fail(f"dbgsym depends: {dbg_fields}")
    build_id = re.search(r"Build-Ids: (\S+)", dbg_fields).group(1)
    debug_file = f"./usr/lib/debug/.build-id/{build_id[:2]}/{build_id[2:]}.debug"
    if debug_file not in run(["dpkg-deb", "-c", dbgdeb]).stdout:
        fail(f"{debug_file} is not in the dbgsym package")
    print(f"packages: {main[0]} ({os.path.getsize(deb) >> 10} KiB, installed "
          f"{fields['Installed-Size']} KiB), {dbg[0]} ({os.path.getsize(dbgdeb) >> 10} KiB)")
    return deb, fields, build_id


def install_into(root, deb):
    for d in ("var/lib/dpkg/info", "var/lib/dpkg/updates", "var/log", "etc"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    for f in ("var/lib/dpkg/status", "etc/passwd", "etc/group", "etc/shadow", "etc/gshadow"):
        open(os.path.join(root, f), "a").close()
    # The dependencies are this machine's (checked above), not the fresh root's.
    run(["dpkg", f"--root={root}", "--force-script-chrootless", "--force-depends",
         "--force-not-root", "-i", deb])
    passwd = open(os.path.join(root, "etc/passwd")).read()
    m = re.search(r"^sluice:x:(\d+):(\d+):[^:]*:/var/lib/sluice:/usr/sbin/nologin$", passwd, re.M)
    if not m:
        fail(f"the postinst made no sluice user: {passwd!r}")
    uid = int(m.group(1))
    for d in ("var/lib/sluice", "var/lib/sluice/lake"):
        st = os.stat(os.path.join(root, d))
        if st.st_uid != uid or st.st_mode & 0o777 != 0o750:
            fail(f"/{d}: uid {st.st_uid} mode {oct(st.st_mode)}")
    st = os.stat(os.path.join(root, "etc/sluice/sluice.yaml"))
    if st.st_mode & 0o777 != 0o640:
        fail(f"sluice.yaml mode {oct(st.st_mode)}")
    binary = os.path.join(root, "usr/bin/sluice")
    if ".debug_info" in run(["readelf", "-S", binary]).stdout:
        fail("the installed binary is not stripped")
    runpath = run(["readelf", "-d", binary]).stdout
    if "[$ORIGIN/../lib/sluice]" not in runpath:
        fail(f"RUNPATH: {runpath}")


def unit_command(root):
    unit = open(os.path.join(root, "usr/lib/systemd/system/sluice.service")).read()
    settings = dict(re.findall(r"^(\w+)=(.*)$", unit, re.M))
    want = {"Type": "notify", "User": "sluice", "Restart": "on-failure",
            "ExecReload": "/bin/kill -HUP $MAINPID", "StateDirectory": "sluice",
            "WorkingDirectory": "/var/lib/sluice"}
    for k, v in want.items():
        if settings.get(k) != v:
            fail(f"unit {k}={settings.get(k)!r}, want {v!r}")
    if int(settings.get("LimitNOFILE", "0")) < 65536:
        fail(f"LimitNOFILE={settings.get('LimitNOFILE')}")
    argv = settings["ExecStart"].split()
    if argv[:2] != ["/usr/bin/sluice", "serve"] or argv[2:] != ["--config",
                                                                "/etc/sluice/sluice.yaml"]:
        fail(f"ExecStart={settings['ExecStart']}")
    return argv


class Notifications:
    """The test's stand-in for systemd's notify socket."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)

    def wait_for(self, assignment, timeout, proc=None):
        deadline = time.time() + timeout
        seen = []
        while time.time() < deadline:
            if proc is not None and proc.poll() is not None:
                fail(f"sluice exited {proc.returncode} before {assignment}; got {seen}")
            self.sock.settimeout(0.5)
            try:
                msg = self.sock.recv(4096).decode()
            except socket.timeout:
                continue
            seen.append(msg)
            if assignment in msg.split("\n"):
                return seen
        fail(f"no {assignment} within {timeout} s; got {seen}")


def serve(root, work):
    argv = unit_command(root)
    ports = {k: free_port() for k in ("kafka", "http", "pg", "registry")}
    data = os.path.join(work, "data")
    os.makedirs(data)
    # The installed config, its paths and ports moved here; JSON logs.
    config = open(os.path.join(root, "etc/sluice/sluice.yaml")).read()
    config = config.replace("data_dir: /var/lib/sluice\n", f"data_dir: {data}\n")
    config = config.replace("warehouse: /var/lib/sluice/lake\n", f"warehouse: {data}/lake\n")
    config += (f"\nkafka.addr: 127.0.0.1:{ports['kafka']}\nhttp.addr: 127.0.0.1:{ports['http']}\n"
               f"query.pg_addr: 127.0.0.1:{ports['pg']}\n"
               f"schema_registry.addr: 127.0.0.1:{ports['registry']}\nlog.format: json\n")
    conf_path = os.path.join(work, "sluice.yaml")
    open(conf_path, "w").write(config)
    argv = [os.path.join(root, "usr/bin/sluice")] + argv[1:3] + [conf_path]
    notify = Notifications(os.path.join(work, "notify"))
    env = dict(os.environ, NOTIFY_SOCKET=notify.path)
    # O_APPEND: sluice's writes go to the end whatever the test's reads do.
    log_path = os.path.join(work, "serve.log")
    with open(log_path, "a") as log:
        proc = subprocess.Popen(argv, cwd=data, env=env, stdout=log, stderr=subprocess.STDOUT)
    return proc, ports, notify, log_path, conf_path


def check_json_lines(log_path):
    with open(log_path) as log:
        lines = [l for l in log.read().splitlines() if l.strip()]
    for line in lines:
        try:
            obj = json.loads(line)
        except ValueError:
            fail(f"log line is not JSON: {line!r}")
        if set(obj) != {"ts", "level", "logger", "msg"}:
            fail(f"log line fields: {obj}")
    return [json.loads(l) for l in lines]


def exercise(proc, ports, notify, log, conf_path):
    """`log` is the path of the process's output."""
    notify.wait_for("READY=1", 90, proc)
    status, body = http_get(ports["http"], "/readyz")
    if status != 200 or body != "ready\n":
        fail(f"/readyz: {status} {body!r}")
    _, metrics = http_get(ports["http"], "/metrics")
    commit = re.search(r"^commit (\S+)", run([SLUICE, "version"]).stdout, re.M).group(1)
    m = re.search(r'^sluice_build_info\{([^}]*)\} 1$', metrics, re.M)
    if not m or f'commit="{commit}"' not in m.group(1) or 'version="' not in m.group(1):
        fail(f"sluice_build_info: {m.group(0) if m else 'missing'}")

    broker = f"127.0.0.1:{ports['kafka']}"
    run([os.path.join(os.path.dirname(conf_path), "root/usr/bin/sluice"), "topic", "create",
         "--brokers", broker, "-p", "3", "installed"], timeout=60)
    run(["kcat", "-b", broker, "-P", "-t", "installed", "-K:"],
        input="k1:one\nk2:two\nk3:three\n", timeout=60)
    got = run(["kcat", "-b", broker, "-C", "-t", "installed", "-o", "beginning", "-e", "-q",
               "-f", "%k=%s\n"], timeout=60).stdout.split()
    got.sort()
    if got != ["k1=one", "k2=two", "k3=three"]:
        fail(f"kcat read back {got}")
    psql = shutil.which("psql") or "/usr/lib/postgresql/15/bin/psql"
    out = run([psql, f"host=127.0.0.1 port={ports['pg']} user=sluice dbname=sluice", "-At", "-c",
               "SELECT count(*), max(CAST(value AS VARCHAR)) FROM topic('installed')"],
              timeout=60).stdout.strip()
    if out != "3|two":
        fail(f"psql over the topic: {out!r}")

    # Nothing of the source tree or the build directory is mapped: the installed
    # libduckdb.so is.
    maps = open(f"/proc/{proc.pid}/maps").read()
    paths = sorted({l.split()[-1] for l in maps.splitlines() if len(l.split()) >= 6})
    for p in paths:
        if p.startswith(SRC + "/") or p.startswith(BUILD + "/") or "node_modules" in p:
            fail(f"the installed sluice maps {p}")
    if not any(p.endswith("/usr/lib/sluice/libduckdb.so") for p in paths):
        fail(f"libduckdb.so is not the installed one: {[p for p in paths if 'duckdb' in p]}")

    # SIGHUP: log.level read again, a changed port waits for a restart.
    config = open(conf_path).read()
    config = config.replace(f"http.addr: 127.0.0.1:{ports['http']}\n",
                            f"http.addr: 127.0.0.1:{free_port()}\nlog.level: warn\n")
    open(conf_path, "w").write(config)
    proc.send_signal(signal.SIGHUP)
    seen = notify.wait_for("READY=1", 60, proc)
    if not any(m.startswith("RELOADING=1\nMONOTONIC_USEC=") for m in seen):
        fail(f"no RELOADING=1 before READY=1: {seen}")
    msgs = [o["msg"] for o in check_json_lines(log)]
    reread = [m for m in msgs if m.startswith("SIGHUP: ") and "read again (" in m]
    if not reread or "log level warn," not in reread[0] or \
            "used after a restart: http.addr" not in reread[0]:
        fail(f"SIGHUP said: {msgs[-6:]}")
    if http_get(ports["http"], "/readyz")[0] != 200:
        fail("/readyz after SIGHUP")
    # A second SIGHUP still names what waits for a restart; an unknown key is named as
    # what the next start would refuse.
    open(conf_path, "a").write("kafka.adress: 127.0.0.1:1\n")
    proc.send_signal(signal.SIGHUP)
    notify.wait_for("READY=1", 60, proc)
    records = check_json_lines(log)
    reread = [o for o in records if o["msg"].startswith("SIGHUP: ") and "read again (" in o["msg"]]
    if len(reread) != 2 or "http.addr" not in reread[1]["msg"] or reread[1]["level"] != "warn":
        fail(f"second SIGHUP said: {[o['msg'] for o in records[-6:]]}")
    if not any("next start would refuse" in o["msg"] and "kafka.adress" in o["msg"]
               for o in records):
        fail(f"the unknown key was not named: {[o['msg'] for o in records[-6:]]}")

    proc.send_signal(signal.SIGTERM)
    notify.wait_for("STOPPING=1", 30)
    try:
        rc = proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        fail("sluice did not stop within 120 s of SIGTERM")
    if rc != 0:
        fail(f"sluice exited {rc}")
    msgs = [o["msg"] for o in check_json_lines(log)]
    if msgs[-1] != "stopped":
        fail(f"last line {msgs[-1]!r}")


def check_config(root, work):
    binary = os.path.join(root, "usr/bin/sluice")
    shipped = os.path.join(root, "etc/sluice/sluice.yaml")
    existed = os.path.exists("/var/lib/sluice")
    r = run([binary, "serve", "--config", shipped, "--check-config"], check=False)
    if r.returncode != 0 or "configuration OK" not in r.stdout:
        fail(f"--check-config of the shipped config: {r.returncode}\n{r.stdout}{r.stderr}")
    if not existed and os.path.exists("/var/lib/sluice"):
        fail("--check-config made /var/lib/sluice")
    # Every "# key: value" line uncommented is a good config too.
    text = open(shipped).read()
    keys = re.findall(r"^# ([a-z0-9_.]+): ", text, re.M)
    if len(keys) < 40:
        fail(f"only {len(keys)} commented keys in the shipped config")
    every = re.sub(r"^# ([a-z0-9_.]+: )", r"\1", text, flags=re.M)
    every = every.replace("/var/lib/sluice", os.path.join(work, "every"))
    path = os.path.join(work, "every.yaml")
    open(path, "w").write(every)
    r = run([binary, "serve", "--config", path, "--check-config"], check=False)
    if r.returncode != 0:
        fail(f"the shipped config with every key uncommented: {r.stdout}{r.stderr}")
    if os.path.exists(os.path.join(work, "every")):
        fail("--check-config made the data directory")
    for bad, words in (("kafka.adr: 127.0.0.1:9092\n", "kafka.adr"),
                       ("log.format: xml\n", "log.format"),
                       ("storage.flush.ms: soon\n", "storage.flush.ms"),
                       ("kafka.addr: [1, 2\n", "bad.yaml")):
        p = os.path.join(work, "bad.yaml")
        open(p, "w").write(bad)
        r = run([binary, "serve", "--config", p, "--check-config"], check=False)
        if r.returncode != 2 or words not in r.stderr:
            fail(f"--check-config of {bad!r}: {r.returncode} {r.stderr!r}")


def main():
    if os.geteuid() != 0:
        # The postinst gives files to the sluice user it makes (chown), as dpkg runs it.
        print("SKIP: installing the package needs root")
        sys.exit(77)
    for tool in ("dpkg-deb", "kcat", "readelf", "objcopy"):
        if shutil.which(tool) is None:
            fail(f"{tool} is missing (scripts/setup.sh installs it)")
    work = tempfile.mkdtemp(prefix="sluice-package-")
    proc = None
    try:
        out = os.path.join(work, "packages")
        env = dict(os.environ, SLUICE_DEB_NO_BUILD="1")
        r = run([os.path.join(SRC, "scripts/make-deb.sh"), BUILD, out], env=env, timeout=900)
        print(r.stdout.strip())
        deb, fields, build_id = check_packages(out)
        root = os.path.join(work, "root")
        install_into(root, deb)
        check_config(root, work)
        # The installed tree copied anywhere runs: libduckdb.so is found through $ORIGIN.
        moved = os.path.join(work, "elsewhere")
        shutil.copytree(os.path.join(root, "usr"), moved, symlinks=True)
        v = run([os.path.join(moved, "bin/sluice"), "version"]).stdout
        if not v.startswith("sluice ") or "\ncommit " not in v:
            fail(f"the copied tree's sluice version: {v!r}")
        # Installing the same package again configures it again: nothing fails, the
        # administrator's mode on the config stays.
        os.chmod(os.path.join(root, "etc/sluice/sluice.yaml"), 0o600)
        run(["dpkg", f"--root={root}", "--force-script-chrootless", "--force-depends",
             "--force-not-root", "-i", deb])
        if os.stat(os.path.join(root, "etc/sluice/sluice.yaml")).st_mode & 0o777 != 0o600:
            fail("a reinstallation changed the config's mode")
        if len(re.findall(r"^sluice:", open(os.path.join(root, "etc/passwd")).read(), re.M)) != 1:
            fail("a reinstallation made a second sluice user")
        proc, ports, notify, log, conf_path = serve(root, work)
        exercise(proc, ports, notify, log, conf_path)
        proc = None
        # Removed: the binary goes, the config and the data stay; purged: the config goes.
        run(["dpkg", f"--root={root}", "--force-script-chrootless", "--force-not-root",
             "-r", "sluice"])
        if os.path.exists(os.path.join(root, "usr/bin/sluice")):
            fail("dpkg -r left /usr/bin/sluice")
        if not os.path.exists(os.path.join(root, "etc/sluice/sluice.yaml")) or \
                not os.path.isdir(os.path.join(root, "var/lib/sluice")):
            fail("dpkg -r removed the config or the data")
        run(["dpkg", f"--root={root}", "--force-script-chrootless", "--force-not-root",
             "--purge", "sluice"])
        if os.path.exists(os.path.join(root, "etc/sluice")):
            fail("dpkg --purge left /etc/sluice")
        if not os.path.isdir(os.path.join(root, "var/lib/sluice")):
            fail("dpkg --purge removed the data")
        print("PASS")
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
