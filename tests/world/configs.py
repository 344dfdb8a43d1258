"""One config writer per server software of the test world (gen.py).

Each `SOFTWARE(world, inst, d)` writes the instance's config into its
directory `d` and returns (command line, readiness checks); a check is
{"addr", "qname", "qtype", "expect": aa | tc | referral | answer | bound},
which ctl.py waits for.
"""

import json
import os

from model import TTL


def knot(world, inst, d):
    conf = os.path.join(d, "knot.conf")
    busy = inst["name"] in ("root", "tld-a", "tld-b")
    os.makedirs(os.path.join(d, "db"), exist_ok=True)
    listen = ", ".join(f"{world.bind(a)}@53" for a in inst["addresses"])
    lines = [
        "# written by tests/world/gen.py",
        "server:",
        f'    rundir: "{d}"',
        f"    listen: [ {listen} ]",
        # The root and TLD servers are asked most: more workers, and with
        # reuseport each TCP worker has its own listen queue (knot 3.2's
        # backlog is a fixed 10).
        f"    udp-workers: {2 if busy else 1}",
        f"    tcp-workers: {4 if busy else 2}",
        f"    tcp-reuseport: {'on' if busy else 'off'}",
        "    background-workers: 1",
        f'    version: "{inst["version"]}"' if inst["version"] else '    version: ""',
        '    identity: ""',
        "log:",
        "  - target: stderr",
        "    any: warning",
        "database:",
        f'    storage: "{d}/db"',
        "acl:",
        "  - id: axfr-loopback",
        "    address: [ 127.0.0.0/8, ::1 ]",
        "    action: transfer",
        "template:",
        "  - id: default",
        f'    storage: "{d}/zones"',
        '    file: "%s.zone"',
        "    zonefile-sync: -1",
        "    zonefile-load: whole",
        "    journal-content: none",
        "    semantic-checks: off",
        "zone:",
    ]
    for apex in inst["zones"]:
        lines.append(f"  - domain: \"{apex}\"")
        if apex == ".":
            lines.append('    file: "root.zone"')
        if apex in inst.get("axfr_allowed", []):
            lines.append("    acl: axfr-loopback")
    with open(conf, "w") as f:
        f.write("\n".join(lines) + "\n")
    return ["knotd", "-c", conf], soa_checks(inst)


def soa_checks(inst):
    return [{"addr": a, "qname": inst["zones"][0], "qtype": "SOA", "expect": "aa"}
            for a in inst["addresses"]]


def nsd(world, inst, d):
    conf = os.path.join(d, "nsd.conf")
    lines = ["# written by tests/world/gen.py", "server:"]
    for a in inst["addresses"]:
        lines.append(f"    ip-address: {world.bind(a)}@53")
    v6 = any(":" in a for a in inst["addresses"])
    lines += [
        "    server-count: 1",
        '    username: ""',
        '    chroot: ""',
        f'    zonesdir: "{d}/zones"',
        '    database: ""',
        f'    zonelistfile: "{d}/zone.list"',
        f'    xfrdfile: "{d}/xfrd.state"',
        f'    xfrdir: "{d}"',
        f'    pidfile: "{d}/nsd.pid"',
        "    hide-version: no",
        f'    version: "{inst["version"]}"',
        "    hide-identity: yes",
        f"    do-ip4: {'no' if v6 else 'yes'}",
        f"    do-ip6: {'yes' if v6 else 'no'}",
        "    verbosity: 1",
        "remote-control:",
        "    control-enable: no",
    ]
    for apex in inst["zones"]:
        lines += ["zone:", f"    name: \"{apex}\"", f"    zonefile: \"{apex}zone\""]
    with open(conf, "w") as f:
        f.write("\n".join(lines) + "\n")
    return ["nsd", "-d", "-c", conf], soa_checks(inst)


def dnsdist(world, inst, d):
    conf = os.path.join(d, "dnsdist.conf")
    zone = world.instances["edge"]["zones"][0]
    with open(conf, "w") as f:
        f.write("-- written by tests/world/gen.py: truncates every UDP answer\n")
        f.write("setSecurityPollSuffix('')\n")
        f.write(f"setLocal('{world.bind(inst['addresses'][0])}:53')\n")
        f.write(f"newServer({{address='{world.bind(inst['backend'])}:53', checkName='{zone}', "
                "checkType='SOA'})\n")
        f.write("addAction(TCPRule(false), TCAction())\n")
    checks = [{"addr": inst["addresses"][0], "qname": "tc.com.", "qtype": "SOA",
               "expect": "tc"}]
    return ["dnsdist", "--supervised", "--disable-syslog", "-C", conf], checks


def netem(world, inst, d):
    a = inst["addresses"][0]
    argv = [world.a.netem, "--delay-ms", str(inst["delay_ms"]),
            f"{world.bind(a)}:53={world.bind(inst['backend'])}:53"]
    return argv, [{"addr": a, "qname": "slow.com.", "qtype": "SOA", "expect": "aa",
                   "timeout": 2 * inst["delay_ms"] / 1000 + 1}]


def netem_wan(world, inst, d):
    """The wide-area network in front of every server (gen.py --wan)."""
    argv = [world.a.netem, "--loss", world.a.wan_loss, "--seed", str(world.a.seed),
            "--stats", os.path.join(d, "stats.json")]
    return argv + inst["links"], []


def authserver_py(world, inst, d):
    ip = world.ip
    conf = os.path.join(d, "authserver.json")
    zones = {apex: [list(r) for r in world.model.zones[apex].records]
             for apex in inst["zones"]}
    servers = [
        {"addr": ip(53, 1), "mode": "silent"},
        {"addr": ip(54, 1), "mode": "poison", "zone": "poison.com.",
         "additional": [list(r) for r in world.poison["additional"]],
         "authority": [list(r) for r in world.poison["authority"]]},
        {"addr": ip(54, 2), "mode": "normal", "zone": "handmade.org."},
        {"addr": ip(54, 3), "mode": "noedns", "zone": "noedns.com."},
        {"addr": ip(55, 1), "mode": "upward",
         "referral": [[".", TTL, "NS", "a.root-servers.net."]],
         "glue": [["a.root-servers.net.", TTL, "A", ip(0, 1)]]},
    ]
    for server in servers:
        server["addr"] = world.bind(server["addr"])
    with open(conf, "w") as f:
        json.dump({"zones": zones, "servers": servers}, f, indent=1)
    checks = [{"addr": ip(54, 1), "qname": "poison.com.", "qtype": "SOA", "expect": "aa"},
              {"addr": ip(54, 2), "qname": "handmade.org.", "qtype": "SOA", "expect": "aa"},
              {"addr": ip(54, 3), "qname": "noedns.com.", "qtype": "SOA", "expect": "aa"},
              {"addr": ip(55, 1), "qname": "upward.com.", "qtype": "SOA",
               "expect": "referral"},
              {"addr": ip(53, 1), "expect": "bound"}]
    return ["python3", world.a.authserver, conf], checks


def unbound(world, inst, d):
    conf = os.path.join(d, "unbound.conf")
    a = inst["addresses"][0]
    lines = [
        "# written by tests/world/gen.py: the truth for the world",
        "server:",
        f"    interface: {a}@53",
        "    port: 53",
        "    do-ip6: yes",
        "    prefer-ip6: no",
        "    num-threads: 1",
        "    do-daemonize: no",
        '    username: ""',
        '    chroot: ""',
        f'    directory: "{d}"',
        f'    pidfile: "{d}/unbound.pid"',
        "    use-syslog: no",
        '    logfile: ""',
        "    verbosity: 1",
        "    access-control: 127.0.0.0/8 allow",
        f'    root-hints: "{world.a.out}/named.root"',
        "    do-not-query-localhost: no",
        '    module-config: "iterator"',
        "    qname-minimisation: no",
        "    harden-glue: yes",
        "    harden-referral-path: no",
        "    harden-below-nxdomain: yes",
        "    aggressive-nsec: no",
        "    minimal-responses: yes",
        "    msg-cache-size: 64m",
        "    rrset-cache-size: 128m",
        "    outgoing-range: 1024",
        "    num-queries-per-thread: 1024",
        # A silent server gives SERVFAIL in seconds, not minutes; the
        # slow one (2 x delay) stays well inside the bound.
        "    infra-cache-max-rtt: 2000",
        "    outbound-msg-retry: 2",
        # Debian's 1.17.1 has the backported discard-timeout (default
        # 1.9 s): a client whose answer takes longer gets none at all.
        "    discard-timeout: 0",
    ]
    if world.a.wan:
        # Behind the emulator, which keeps a socket per client address: a
        # few source ports, not a random one per query.
        lines += [
            "    outgoing-range: 64",
            "    num-queries-per-thread: 32",
            "    outgoing-port-avoid: 0-65535",
            "    outgoing-port-permit: 40000-40063",
        ]
    lines += ["remote-control:", "    control-enable: no"]
    with open(conf, "w") as f:
        f.write("\n".join(lines) + "\n")
    checks = [{"addr": a, "qname": ".", "qtype": "NS", "expect": "answer", "rd": True}]
    return ["unbound", "-d", "-c", conf], checks
