#!/usr/bin/env python3
"""What `--metrics-listen` costs a run, scraped every 100 ms.

Three sides of the same command, same release binary, same input, in
alternating rounds (the order rotates each round):

  off      no endpoint
  idle     --metrics-listen ADDR, nobody scrapes it
  scraped  --metrics-listen ADDR, GET /metrics every SCRAPE seconds

Per run: wall time and dnsluice's own CPU time (user + system, from
wait4's rusage of the child only, to the microsecond). The scraper is a
thread of this script (one new connection per scrape: the endpoint closes
each); its CPU time (thread_time) is noted, never added to dnsluice's.

Prints, per pair: the median of each side, the medians of the per-round
ratios idle/off and scraped/off (and scraped/idle) with their spread
(min–max over the rounds), the scrapes per run, and a Markdown row.

With --callgrind RUNS, each side runs under valgrind's callgrind instead
(instructions of every thread: repeatable on a loaded machine, where CPU
times are not): the instructions a scrape costs, and what a scrape every
SCRAPE seconds adds to the native run's instructions per second. Under
callgrind the run is ~50x slower, so it is scraped ~50x more per message.

Usage (after cargo build --release; replay pairs need tests/servers/up.sh):
  cpu-lock bench python3 benches/metrics-overhead.py --pair run --threads 1 --rounds 9
  cpu-lock bench python3 benches/metrics-overhead.py --pair run --rounds 9
  cpu-lock bench python3 benches/metrics-overhead.py --pair replay --rounds 9
  python3 benches/metrics-overhead.py --pair run --threads 1 --count 200000 --callgrind 2
"""

import argparse
import os
import random
import socket
import statistics
import subprocess
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Scraper(threading.Thread):
    """GETs http://ADDR/metrics every `period` seconds until stopped."""

    def __init__(self, addr, period):
        super().__init__(daemon=True)
        self.addr, self.period = addr, period
        self.stop = threading.Event()
        self.scrapes = 0
        self.cpu = 0.0

    def get(self):
        host, port = self.addr.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=2) as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        return data.startswith(b"HTTP/1.1 200 ")

    def run(self):
        start = time.thread_time()
        while not self.stop.is_set():
            t = time.monotonic()
            try:
                if self.get():
                    self.scrapes += 1
            except OSError:
                pass  # not listening yet, or gone
            self.stop.wait(max(0.0, self.period - (time.monotonic() - t)))
        self.cpu = time.thread_time() - start


def timed(cmd, scrape_addr=None, period=0.1):
    """Runs `cmd`; (wall s, child CPU s, scrapes, scraper CPU s)."""
    scraper = Scraper(scrape_addr, period) if scrape_addr else None
    if scraper:
        scraper.start()
    t = time.perf_counter()
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - t
    err = child.stderr.read().decode(errors="replace")
    if scraper:
        scraper.stop.set()
        scraper.join()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {cmd}: {err}")
    return (wall, usage.ru_utime + usage.ru_stime,
            scraper.scrapes if scraper else 0, scraper.cpu if scraper else 0.0)


def callgrind(cmd, scrape_addr, period, out):
    """`cmd` under callgrind (every thread counted); (instructions, scrapes)."""
    wrapped = ["valgrind", "--tool=callgrind", "--fair-sched=yes", f"--callgrind-out-file={out}"] + cmd
    _, _, scrapes, _ = timed(wrapped, scrape_addr, period)
    for line in open(out):
        if line.startswith("totals:") or line.startswith("summary:"):
            return int(line.split()[1]), scrapes
    sys.exit(f"no totals in {out}")


def instruction_counts(sides, period, runs):
    """Each side under callgrind, `runs` times; the scrape's cost in
    instructions, and what a scrape every `period` s adds to the native run
    (its instructions per second from the native CPU time of the off side)."""
    ir = {side: [] for side in sides}
    scrapes = []
    for r in range(runs):
        for side, (cmd, scrape) in sides.items():
            n, k = callgrind(cmd, scrape, period, f"/tmp/metrics-callgrind.{os.getpid()}.out")
            ir[side].append(n)
            if scrape:
                scrapes.append(k)
            print(f"callgrind round {r + 1}: {side} {n:,} instructions"
                  + (f", {k} scrapes" if scrape else ""), flush=True)
    os.remove(f"/tmp/metrics-callgrind.{os.getpid()}.out")
    cpu = statistics.median(timed(sides["off"][0])[1] for _ in range(5))
    off, idle, scraped = (statistics.median(ir[s]) for s in ("off", "idle", "scraped"))
    per_scrape = (scraped - idle) / statistics.median(scrapes)
    per_second = off / cpu
    print(f"instructions: off {off:,.0f}, idle {idle:,.0f} ({(idle / off - 1) * 100:+.3f} %), "
          f"scraped {scraped:,.0f}; per scrape {per_scrape:,.0f}; the native run: "
          f"{cpu:.3f} s CPU, {per_second:,.0f} instructions/s; a scrape every {period} s adds "
          f"{per_scrape / period / per_second * 100:.3f} % (idle endpoint {(idle / off - 1) * 100:+.3f} %)")


def spread(values):
    return f"{min(values):.4f}–{max(values):.4f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pair", choices=["run", "replay"], default="run")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--threads", help="run: --threads N (default: the default)")
    ap.add_argument("--count", type=int, default=4_000_000, help="run: messages")
    ap.add_argument("--replay-count", type=int, default=500_000)
    ap.add_argument("--scrape", type=float, default=0.1, help="seconds between scrapes")
    ap.add_argument("--callgrind", type=int, metavar="RUNS",
                    help="count instructions under callgrind instead (RUNS of each side)")
    ap.add_argument("--bin", default=os.path.join(REPO, "target/release/dnsluice"))
    ap.add_argument("--data", default=os.path.join(REPO, "bench-data"))
    a = ap.parse_args()

    os.makedirs(a.data, exist_ok=True)
    if a.pair == "run":
        pcap = os.path.join(a.data, f"big-{a.count}.pcap")
        if not os.path.exists(pcap):
            subprocess.run([sys.executable, os.path.join(REPO, "benches/gen-pcap.py"),
                            "--count", str(a.count), "--out", pcap], check=True)
        base = [a.bin, "run", os.path.join(REPO, "configs/dump.toml"),
                "--set", f"0.path={pcap}", "--set", "3.path=/dev/null", "-q"]
        if a.threads:
            base += ["--threads", a.threads]
        name = f"run ({a.count:,} messages → JSON, threads {a.threads or 'default'})"
    else:
        pcap = os.path.join(a.data, f"replay-{a.replay_count}.pcap")
        if not os.path.exists(pcap):
            subprocess.run([sys.executable, os.path.join(REPO, "benches/gen-pcap.py"),
                            "--count", str(a.replay_count), "--zone", "lookup.test",
                            "--edns", "0", "--out", pcap], check=True)
        env_file = os.path.join(os.environ.get("DNSLUICE_SERVERS_DIR",
                                               os.path.join(REPO, "target/test-servers")),
                                "servers.env")
        env = dict(line.strip().split("=", 1) for line in open(env_file)
                   if "=" in line and not line.startswith("#"))
        knot = env["KNOT"].strip("'\"")
        base = [a.bin, "replay", pcap, "--server", knot, "--inflight", "100", "-q"]
        name = f"replay ({a.replay_count:,} queries to knot, UDP)"

    addr = f"127.0.0.1:{random.randint(19000, 19999)}"
    sides = {
        "off": (base, None),
        "idle": (base + ["--metrics-listen", addr], None),
        "scraped": (base + ["--metrics-listen", addr], addr),
    }
    if a.callgrind:
        return instruction_counts(sides, a.scrape, a.callgrind)
    order = list(sides)
    results = {k: [] for k in sides}
    print(f"# {time.strftime('%FT%TZ', time.gmtime())} {os.cpu_count()} cores, "
          f"load {' '.join(open('/proc/loadavg').read().split()[:3])}; {name}; "
          f"rounds {a.rounds}, scrape every {a.scrape} s", flush=True)
    for r in range(a.rounds):
        rot = order[r % 3:] + order[:r % 3]
        for side in rot:
            cmd, scrape = sides[side]
            results[side].append(timed(cmd, scrape, a.scrape))
        print(f"round {r + 1}: " + "  ".join(
            f"{s} {results[s][-1][0]:.3f}s/{results[s][-1][1]:.3f}s" for s in order), flush=True)
    print(f"# load at the end {' '.join(open('/proc/loadavg').read().split()[:3])}")

    med = {s: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v))
           for s, v in results.items()}

    def ratios(side, base_side, i):
        return [w[i] / b[i] for w, b in zip(results[side], results[base_side])]

    for side, base_side in [("idle", "off"), ("scraped", "off"), ("scraped", "idle")]:
        rw, rc = ratios(side, base_side, 0), ratios(side, base_side, 1)
        print(f"{side}/{base_side}: wall ratio median {statistics.median(rw):.4f} "
              f"(spread {spread(rw)}), CPU ratio median {statistics.median(rc):.4f} "
              f"(spread {spread(rc)})")
    scrapes = [x[2] for x in results["scraped"]]
    scraper_cpu = [x[3] for x in results["scraped"]]
    print(f"scrapes per run: median {statistics.median(scrapes)}, "
          f"scraper CPU per run: median {statistics.median(scraper_cpu):.3f} s")
    for s in order:
        print(f"{s}: wall median {med[s][0]:.3f} s (spread {spread([x[0] for x in results[s]])}), "
              f"CPU median {med[s][1]:.3f} s (spread {spread([x[1] for x in results[s]])})")
    pct = lambda v: f"{(v - 1) * 100:+.1f} %"  # noqa: E731
    rw, rc = ratios("scraped", "off", 0), ratios("scraped", "off", 1)
    print(f"| {name} | {med['off'][0]:.3f} s | {med['scraped'][0]:.3f} s | "
          f"{pct(statistics.median(rw))} ({pct(min(rw))} to {pct(max(rw))}) | "
          f"{med['off'][1]:.3f} s | {med['scraped'][1]:.3f} s | "
          f"{pct(statistics.median(rc))} ({pct(min(rc))} to {pct(max(rc))}) | "
          f"{pct(statistics.median(ratios('idle', 'off', 1)))} | "
          f"{statistics.median(scrapes)} |")


if __name__ == "__main__":
    main()
