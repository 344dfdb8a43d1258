#!/usr/bin/env python3
"""What state a capture's pages are in the page cache, and a way to set it.

    benches/page_cache.py state FILE...    how many page faults mapping each file takes
    benches/page_cache.py reread FILE...   drop each file from the page cache, read it back
    benches/page_cache.py bench FILE...    what the benches run: reread with CACHE=disk, else state

Why it matters: mapping a file costs the kernel about one page fault per
page-cache folio (Linux maps a fault's whole folio, or 64 KiB of small
ones), and releasing it the same again. A file just written (a generator's
output, a capture being written) sits in the cache in small folios: about
30,000 faults for 2 GB. The same file read from disk on a kernel whose file
system keeps large folios (ext4 on Linux 6.18 here, 8 MiB read-ahead) sits
in 2 MiB folios: about 1,000 faults, and mapping and unmapping it costs the
kernel some 0.02 s instead of 0.3-0.4 s. Every tool that maps or reads the
file pays that difference, so benchmark figures are only comparable in the
same state; the benches print it (`state`) and can set "as read from disk"
(`reread`, their CACHE=disk).

A kernel may also page out memory nobody touched for a while (DAMON's
`pageout` action, when the system runs such a scheme; the VM of 2026-12-05
night did, not set up by us: memory idle for 60 s, at most 128 MiB a
second, 38 GB in its first 70 minutes or so), so a capture left unused
between runs comes back partly from disk and in smaller folios; `bench`
says so when a scheme like that is on.

`state` maps the file read-only and reads one byte of every 4 KiB page,
counting the process's minor and major faults (getrusage); major faults mean
part of the file was not in the page cache. `reread` asks the kernel to drop
the file's cached pages (posix_fadvise DONTNEED: clean pages only, so it
syncs the file first) and reads the file once, as `cat` would.
"""
import mmap
import os
import resource
import sys

PAGE = 4096
CHUNK = 8 << 20


def faults():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_minflt, usage.ru_majflt


def state(path):
    size = os.path.getsize(path)
    if size == 0:
        return f"{path}: empty"
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        minor0, major0 = faults()
        total = 0
        for at in range(0, size, PAGE):
            total += m[at]
        minor1, major1 = faults()
    minor, major = minor1 - minor0, major1 - major0
    count = max(minor + major, 1)
    per = size / count / 1024
    kind = "mostly 2 MiB folios" if per >= 1024 else "large folios" if per > 64 else "small folios"
    missing = f", {major:,} from disk" if major else ""
    return f"{path}: {count:,} page faults to map {size:,} bytes ({per:,.0f} KiB a fault: {kind}{missing})"


def reread(path):
    with open(path, "rb") as f:
        fd = f.fileno()
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        while f.read(CHUNK):
            pass


DAMON = "/sys/kernel/mm/damon/admin/kdamonds"


def read(path):
    with open(path) as f:
        return f.read().strip()


def damon_pageout(root=DAMON):
    """A note on each running DAMON scheme that pages out idle memory."""
    notes = []
    for kdamond in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        base = os.path.join(root, kdamond)
        try:
            if read(os.path.join(base, "state")) != "on":
                continue
            for context in sorted(os.listdir(os.path.join(base, "contexts"))):
                ctx = os.path.join(base, "contexts", context)
                aggr_us = int(read(os.path.join(ctx, "monitoring_attrs/intervals/aggr_us")))
                for scheme in sorted(os.listdir(os.path.join(ctx, "schemes"))):
                    sch = os.path.join(ctx, "schemes", scheme)
                    if read(os.path.join(sch, "action")) != "pageout":
                        continue
                    idle_s = int(read(os.path.join(sch, "access_pattern/age/min"))) * aggr_us / 1e6
                    quota = int(read(os.path.join(sch, "quotas/bytes")))
                    per_ms = int(read(os.path.join(sch, "quotas/reset_interval_ms")))
                    limit = f", at most {quota >> 20} MiB every {per_ms} ms" if quota else ""
                    notes.append(f"DAMON (kdamond {kdamond}) pages out memory idle for {idle_s:g} s or more{limit}")
        except (OSError, ValueError):
            continue
    return notes


def main(argv):
    if len(argv) < 3 or argv[1] not in ("state", "reread", "bench"):
        print("\n".join(__doc__.strip().splitlines()[2:5]), file=sys.stderr)
        return 2
    cache = os.environ.get("CACHE") or "as-is"
    if argv[1] == "bench" and cache not in ("as-is", "disk"):
        print(f"page_cache: CACHE must be as-is or disk, got {cache!r}", file=sys.stderr)
        return 2
    again = argv[1] == "reread" or (argv[1] == "bench" and cache == "disk")
    if argv[1] == "bench" and not again:
        for note in damon_pageout():
            print(f"page_cache: {note}: a capture left unused that long comes back partly from disk (CACHE=disk gives a state that repeats)")
    for path in argv[2:]:
        try:
            if again:
                reread(path)
            print(state(path))
        except OSError as error:
            print(f"page_cache: {path}: {error.strerror}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
