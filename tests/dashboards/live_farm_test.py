#!/usr/bin/env python3
"""Every query of the Grafana dashboard answers with data from a live farm (issue 21).

Starts a real farm on loopback (a coordinator with its private redis-server, two CPU workers, each
with /metrics on an ephemeral port; on a machine with NVML and a GPU also a cuda worker), submits a
small CPU campaign and one that no worker can run, starts the Debian package's `prometheus` with a
generated config scraping those ports every second (the farm's rules.yml loaded) through
forwarding servers of this test, whose scrapes are the events it waits on; waits until every
target is up, then evaluates every PromQL expression of dashboards/grafana/*.json through
/api/v1/query after each round of scrapes until each answers with at least one sample, or the
deadline passes. Fails naming
each panel whose query stayed empty. Panels over autokernel_gpu_* series are checked only where
NVML and a GPU exist and are listed as SKIPPED, with the reason, elsewhere. Also checks that
`autokernel status` warns about the unrunnable jobs and that autokernel_jobs_unrunnable counts
them.

Usage: live_farm_test.py <autokernel executable> <source root>
"""
import ctypes
import http.server
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

DEADLINE_S = 90  # from the start of Prometheus until every query must have answered
GPU_SERIES = "autokernel_gpu_"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Scrapes:
    """Each target's /metrics behind a forwarding server of this test, so that Prometheus's scrapes
    are events the test waits on (Prometheus's API gains data only as it scrapes, and says nothing
    when): every scrape is forwarded to the target, counted and announced."""

    def __init__(self):
        self.cond = threading.Condition()
        self.counts = {}
        self.servers = []

    def front(self, target):
        """A local address whose /metrics is target's; each request to it counts as a scrape."""
        scrapes = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                req = urllib.request.Request(f"http://{target}{self.path}",
                                             headers={"Accept": self.headers.get("Accept", "*/*")})
                try:
                    with urllib.request.urlopen(req, timeout=5) as r:
                        body, ctype, code = r.read(), r.headers.get("Content-Type", "text/plain"), 200
                except (urllib.error.URLError, ConnectionError) as e:
                    body, ctype, code = str(e).encode(), "text/plain", 502
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                with scrapes.cond:
                    scrapes.counts[target] += 1
                    scrapes.cond.notify_all()

            def log_message(self, *args):
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.counts[target] = 0
        self.servers.append(server)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return f"127.0.0.1:{server.server_address[1]}"

    def next_round(self, deadline, rounds=1):
        """Waits until every target has been scraped `rounds` more times; False at the deadline.
        A target's next scrape starts after its last one was stored, so one round after an event
        the event's effect on the metrics is in Prometheus."""
        with self.cond:
            want = {t: n + rounds for t, n in self.counts.items()}
            return self.cond.wait_for(lambda: all(self.counts[t] >= n for t, n in want.items()),
                                      timeout=max(0.0, deadline - time.monotonic()))

    def close(self):
        for server in self.servers:
            server.shutdown()


def tee_until(pipe, log_path, pattern, deadline, what):
    """Copies a child's output pipe into its log file, on a thread for the child's whole life (a
    full pipe would block it), and returns the match of `pattern` in the first line that has it:
    the child's own line is the event waited for, no polling."""
    found = queue.Queue()

    def copy():
        matched = False
        with open(log_path, "wb") as log:
            for line in iter(pipe.readline, b""):
                log.write(line)
                log.flush()
                if not matched:
                    m = re.search(pattern, line.decode(errors="replace"))
                    if m:
                        matched = True
                        found.put(m)
        if not matched:
            found.put(None)  # the child closed its output (it exited) without the line

    threading.Thread(target=copy, daemon=True).start()
    try:
        m = found.get(timeout=max(0.0, deadline - time.monotonic()))
    except queue.Empty:
        raise SystemExit(f"live_farm_test: timed out waiting for {what}")
    if m is None:
        raise SystemExit(f"live_farm_test: the process exited before printing {what}")
    return m


def http_json(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return json.load(r)
    except (urllib.error.URLError, ConnectionError, json.JSONDecodeError):
        return None


def gpu_reason():
    """None where the GPU panels can have data, else why they cannot."""
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return "no NVML (libnvidia-ml.so.1 not loadable): per-GPU series are not exported here"
    smi = shutil.which("nvidia-smi")
    if not smi or "GPU 0" not in subprocess.run([smi, "-L"], capture_output=True, text=True).stdout:
        return "NVML present but no GPU listed by nvidia-smi"
    return None


def dashboard_queries(root):
    """(dashboard file, panel title, refId, expr) for every target of every panel."""
    out = []
    folder = os.path.join(root, "dashboards", "grafana")
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".json"):
            continue
        with open(os.path.join(folder, name)) as f:
            d = json.load(f)
        panels = list(d.get("panels", []))
        for p in list(panels):
            panels.extend(p.get("panels", []))  # panels of collapsed rows
        for p in panels:
            for t in p.get("targets", []):
                if t.get("expr"):
                    out.append((name, p.get("title", "?"), t.get("refId", "?"), t["expr"]))
    return out


def substitute(expr):
    """Grafana's variables as a dashboard showing everything would fill them in."""
    expr = expr.replace("$__rate_interval", "30s").replace("$__interval", "5s").replace("$__range", "5m")
    return re.sub(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?", ".*", expr)


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    ak, root = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    for tool in ("prometheus", "redis-server"):
        if not shutil.which(tool):
            raise SystemExit(f"live_farm_test: {tool} not found; install the Debian package (scripts/setup.sh)")
    started = time.monotonic()
    work = tempfile.mkdtemp(prefix="ak-live-farm-")
    procs = []
    scrapes = Scrapes()

    def spawn(argv, log, pipe=False):
        """Starts a child in its own session, its output into `log` in the work folder; with pipe, into
        a pipe (stderr too) that the caller hands to tee_until, which copies it into `log`."""
        f = subprocess.PIPE if pipe else open(os.path.join(work, log), "w")
        p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT if pipe else f, start_new_session=True)
        procs.append(p)
        return p

    try:
        deadline = time.monotonic() + 90  # the coordinator and both workers, each starting a sandbox
        coord = spawn([ak, "coordinator", "--data-dir", f"{work}/coord", "--workers-bind", "tcp://127.0.0.1:*",
                       "--clients-bind", "tcp://127.0.0.1:*", "--metrics", "127.0.0.1:0"],
                      "coordinator.log", pipe=True)
        m = tee_until(coord.stdout, os.path.join(work, "coordinator.log"), r"^READY (\{.*\})", deadline,
                      f"the coordinator's READY line (see {work}/coordinator.log)")
        ready = json.loads(m.group(1))
        clients = ready["clients"]
        targets = {"autokernel-coordinator": [f"127.0.0.1:{ready['metrics_port']}"], "autokernel-worker": []}

        no_gpu = gpu_reason()
        workers = [["--backend", "cpu", "--id", f"live-cpu{i}"] for i in range(2)]
        if no_gpu is None:
            workers.append(["--backend", "cuda", "--gpus", "0", "--id", "live-gpu0"])
        for i, extra in enumerate(workers):
            log = f"worker{i}.log"
            w = spawn([ak, "worker", "--coordinator", ready["workers"], "--cache-dir", f"{work}/cache",
                       "--state-dir", f"{work}/worker{i}", "--metrics", "127.0.0.1:0", *extra], log, pipe=True)
            m = tee_until(w.stdout, os.path.join(work, log), r"worker /metrics on port (\d+)", deadline,
                          f"worker {i}'s /metrics port (see {work}/{log})")
            targets["autokernel-worker"].append(f"127.0.0.1:{m.group(1)}")

        # A small campaign (one configuration six times: compile cache hits after the first) and one
        # that asks for a GPU no worker has.
        campaign = {"name": "live-softmax", "kernel_type": "softmax", "backend": "cpu", "shapes": [[64, 1024]],
                    "dtypes": ["fp32"], "configs": "default", "repeat": 6, "timeout_ms": 60000,
                    "measure": {"warmup": 1, "min_samples": 3, "max_samples": 20, "max_time_ms": 100}}
        stranded = dict(campaign, name="live-stranded", repeat=2, requires={"gpu_model": "No Such GPU"})
        submitted = [campaign, stranded]
        if no_gpu is None:
            # Work for the cuda worker, so that its GPU series are read while it computes: softmax
            # at a large shape, every configuration, each timed for up to half a second.
            submitted.append({"name": "live-cuda", "kernel_type": "softmax", "backend": "cuda",
                              "shapes": [[8192, 32000]], "dtypes": ["fp32", "bf16"], "configs": "default",
                              "repeat": 12, "timeout_ms": 120000,
                              "measure": {"warmup": 10, "min_samples": 200, "max_samples": 2000,
                                          "max_time_ms": 500}})
        for c in submitted:
            path = os.path.join(work, c["name"] + ".json")
            with open(path, "w") as f:
                json.dump(c, f)
            subprocess.run([ak, "submit", "--client", clients, path], check=True, capture_output=True, timeout=30)

        # submit returns once its jobs are queued, and no worker offers that GPU: the first status warns.
        status = subprocess.run([ak, "status", "--client", clients], capture_output=True, text=True, timeout=30).stdout
        warning = r"warning: 2 queued jobs need gpu_model No Such GPU; no connected worker offers it"
        if not re.search(warning, status):
            raise SystemExit(f"live_farm_test: `autokernel status` does not warn about the unrunnable jobs:\n{status}")
        print("autokernel status warns:", [l for l in status.splitlines() if l.startswith("warning:")][0])

        prom_port = free_port()
        cfg = os.path.join(work, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n")
            f.write(f"rule_files:\n  - {os.path.join(root, 'dashboards', 'rules.yml')}\n")
            f.write("scrape_configs:\n")
            for job, ts in targets.items():
                fronts = [scrapes.front(t) for t in ts]
                f.write(f"  - job_name: {job}\n    static_configs:\n      - targets: {json.dumps(fronts)}\n")
        prom_start = time.monotonic()
        spawn(["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={work}/prometheus",
               f"--web.listen-address=127.0.0.1:{prom_port}"], "prometheus.log")
        api = f"http://127.0.0.1:{prom_port}/api/v1"
        deadline = prom_start + DEADLINE_S

        def all_up():
            t = http_json(f"{api}/targets")
            active = t["data"]["activeTargets"] if t and t.get("status") == "success" else []
            n = sum(len(v) for v in targets.values())
            return len(active) == n and all(a["health"] == "up" for a in active)

        # Two scrapes of each: the first is stored (its `up` too) before the second starts.
        if not scrapes.next_round(deadline, rounds=2) or not all_up():
            raise SystemExit(f"live_farm_test: not every target is up (see {work}/prometheus.log)")

        def query(expr):
            r = http_json(f"{api}/query?" + urllib.parse.urlencode({"query": expr}))
            if not r or r.get("status") != "success":
                return None
            return r["data"]["result"]

        queries = dashboard_queries(root)
        pending = {}
        results = {}
        for q in queries:
            if GPU_SERIES in q[3] and no_gpu:
                results[q] = "SKIPPED (" + no_gpu + ")"
            else:
                pending[q] = substitute(q[3])
        checks = {
            "autokernel_jobs_unrunnable counts the stranded jobs": "autokernel_jobs_unrunnable == 2",
            "the workers report finished jobs": "sum(autokernel_worker_jobs_finished_total) > 0",
            "the compile cache answered a repeat": "sum(autokernel_worker_compile_cache_hits_total) > 0",
        }
        # With a GPU: its series while the cuda campaign ran, the largest value each took over the
        # last two minutes (a gauge read at one scrape may fall between two jobs), quoted below.
        during = {}
        if no_gpu is None:
            # The worker's start-up calibration also loads the GPU: the values are quoted only
            # once the cuda worker has finished jobs of its campaign (the loop below waits for
            # every check), so that the two minutes they span hold the campaign.
            checks["the cuda worker finished jobs of its campaign"] = 'sum(autokernel_worker_jobs_finished_total{device="0"}) > 0'
            checks["the cuda worker's GPU was busy during its campaign"] = "max_over_time(autokernel_gpu_busy_ratio[2m]) > 0"
            during = {"GPU busy (largest over 2 min)": "max_over_time(autokernel_gpu_busy_ratio[2m])",
                      "SM clock (largest over 2 min)": "max_over_time(autokernel_gpu_sm_clock_hertz[2m])",
                      "memory clock (largest over 2 min)": "max_over_time(autokernel_gpu_memory_clock_hertz[2m])",
                      "power (largest over 2 min)": "max_over_time(autokernel_gpu_power_watts[2m])",
                      "temperature (largest over 2 min)": "max_over_time(autokernel_gpu_temperature_celsius[2m])"}
        pending_checks = dict(checks)
        values = {}  # what each answered query returned, quoted in the output

        def quote(series):
            parts = []
            for x in series[:3]:
                labels = ",".join(f"{k}={v}" for k, v in sorted(x.get("metric", {}).items())
                                  if k in ("gpu", "worker", "state", "kind", "backend", "le"))
                parts.append((labels + " " if labels else "") + str(x.get("value", [None, "?"])[1]))
            return "; ".join(parts) + (f"; +{len(series) - 3} series" if len(series) > 3 else "")

        while (pending or pending_checks) and time.monotonic() < deadline:
            for q, expr in list(pending.items()):
                got = query(expr)
                if got:
                    results[q] = "ok"
                    values[q] = quote(got)
                    del pending[q]
            for name, expr in list(pending_checks.items()):
                if query(expr):
                    del pending_checks[name]
            if (pending or pending_checks) and not scrapes.next_round(deadline):
                break
        failed = False
        for q in queries:
            verdict = results.get(q, "NO DATA")
            failed |= verdict == "NO DATA"
            if verdict == "ok":
                print(f"ok       {q[0]} panel '{q[1]}' {q[2]}: {values.get(q, '')}")
            elif verdict == "NO DATA":
                print(f"NO DATA  {q[0]} panel '{q[1]}' {q[2]}: {q[3]}")
            else:
                print(f"SKIPPED  {q[0]} panel '{q[1]}' {q[2]}: {verdict[len('SKIPPED ('):-1]}")
        for name in checks:
            ok = name not in pending_checks
            failed |= not ok
            print(f"{'ok' if ok else 'FAILED':8} {name}: {checks[name]}")
        for name, expr in during.items():
            got = query(expr)
            print(f"during the cuda campaign: {name}: {quote(got) if got else 'no data'}")
        skipped = sum(1 for v in results.values() if v.startswith("SKIPPED"))
        print(f"{len(queries) - skipped} dashboard queries checked against a live farm, {skipped} skipped, "
              f"in {time.monotonic() - started:.1f} s")
        if failed:
            for log in sorted(os.listdir(work)):
                if log.endswith(".log"):
                    print(f"--- {log} (last lines)")
                    with open(os.path.join(work, log), errors="replace") as f:
                        print("".join(f.readlines()[-15:]))
            raise SystemExit("live_farm_test: FAILED: queries above returned no data")
    finally:
        scrapes.close()
        for p in reversed(procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in reversed(procs):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
