"""Writes a lookup benchmark's input: LINES lines of `n<i>.lookup.test`
names (i drawn from 0..99999 with SEED), each followed by `,NAMESERVER`
drawn from the comma-separated NAMESERVERS when some are given.

usage: python3 benches/lookup-input.py FILE NAMESERVERS LINES SEED
"""
import random
import sys

path, servers, lines, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
servers = [s for s in servers.split(",") if s]
with open(path, "w") as f:
    for _ in range(lines):
        name = "n%d.lookup.test" % rng.randrange(100000)
        f.write("%s,%s\n" % (name, rng.choice(servers)) if servers else name + "\n")
