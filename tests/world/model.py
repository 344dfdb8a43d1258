"""The world's zones as data, and the answer a correct resolver gives.

gen.py builds a `Model` (zones with their records and delegations), writes
it out as zone files, and asks `Model.resolve()` for the truth of every test
name. `resolve()` walks the zones the way an iterative resolver walks the
servers: the deepest zone that contains the name answers; CNAME and DNAME
are followed across zones; a wildcard answers for names that do not exist
below it; a zone with no working server gives SERVFAIL.

Records are tuples `(owner, ttl, type, data)`: owner lower-case and
absolute (trailing dot), type the mnemonic, data in the presentation form
that kdig prints for it (runs of blanks as one space, no trailing blank).
"""

TTL = 3600  # every record's TTL unless a case says otherwise


def is_below(name, zone):
    """True when `name` is `zone` or a name under it."""
    return zone == "." or name == zone or name.endswith("." + zone)


def parent_of(name):
    """`a.b.c.` -> `b.c.`; `c.` -> `.`."""
    if name == ".":
        raise ValueError("the root has no parent")
    rest = name.split(".", 1)[1]
    return rest if rest else "."


def ancestors(name, zone):
    """The names from `name` up to (excluding) `zone`, nearest first."""
    out = []
    while name != zone and name != ".":
        out.append(name)
        name = parent_of(name)
    return out


class Zone:
    """One zone: its authoritative records and the cuts to its children."""

    def __init__(self, apex, broken=None):
        self.apex = apex
        self.records = []  # (owner, ttl, type, data), in the order added
        self._seen = set()
        self.broken = broken  # why no server answers for it, or None
        self.cuts = set()  # apexes of the zones delegated from this one
        self._index = None  # owner -> authoritative records, and names in use

    def add(self, owner, ttl, rtype, data):
        owner = owner.lower()
        if not is_below(owner, self.apex):
            raise ValueError(f"{owner} is outside zone {self.apex}")
        rr = (owner, ttl, rtype, data)
        if rr not in self._seen:  # glue can be added by two delegations
            self._seen.add(rr)
            self.records.append(rr)
            self._index = None


class Model:
    """Every zone of the world, by apex."""

    def __init__(self):
        self.zones = {}

    def zone(self, apex, broken=None):
        z = Zone(apex, broken)
        self.zones[apex] = z
        if apex != ".":
            self.zone_of(parent_of(apex)).cuts.add(apex)
        return z

    def zone_of(self, name):
        """The deepest zone whose apex `name` is at or below."""
        probe = name
        while True:
            if probe in self.zones:
                return self.zones[probe]
            if probe == ".":
                raise KeyError(f"no zone holds {name}")
            probe = parent_of(probe)

    def authoritative(self, zone):
        """The zone's records without the data at or below its child cuts
        (the delegation NS sets and glue belong to the child; DS stays)."""
        return [rr for rr in zone.records if self._is_authoritative(zone, rr)]

    def _is_authoritative(self, zone, rr):
        owner, _, rtype, _ = rr
        for name in ancestors(owner, zone.apex):
            if name in zone.cuts:
                return owner == name and rtype == "DS"
        return True

    def index(self, zone):
        """(owner -> authoritative records, set of names that exist: owners
        and every name between an owner and the apex)."""
        if zone._index is None:
            by_owner, exists = {}, {zone.apex}
            for rr in self.authoritative(zone):
                by_owner.setdefault(rr[0], []).append(rr)
                exists.update(ancestors(rr[0], zone.apex))
            zone._index = (by_owner, exists)
        return zone._index

    def resolve(self, qname, qtype, limit=12):
        """(rcode, answers) that a correct resolver returns for qname/qtype.

        A CNAME loop, or a chain longer than `limit`, is SERVFAIL with no
        answers (a resolver reports it as CIRCULAR)."""
        answers = []
        seen = set()
        name = qname.lower()
        for _ in range(limit):
            if name in seen:
                return "SERVFAIL", []
            seen.add(name)
            zone = self.zone_of(name)
            if qtype == "DS" and name == zone.apex and name != ".":
                zone = self.zone_of(parent_of(name))  # DS lives at the parent
            if zone.broken:
                return "SERVFAIL", []
            by_owner, exists = self.index(zone)
            at_name = by_owner.get(name, [])
            # DNAME on an ancestor rewrites the name.
            dname = None
            for anc in ancestors(name, zone.apex)[1:] + [zone.apex]:
                hit = [rr for rr in by_owner.get(anc, []) if rr[2] == "DNAME"]
                if hit and anc != name:
                    dname = hit[0]
                    break
            if dname is not None:
                owner, ttl, _, target = dname
                new = name[: -len(owner)] + target
                answers.append(dname)
                answers.append((name, ttl, "CNAME", new))
                name = new
                continue
            if at_name or name in exists:
                match = [rr for rr in at_name if rr[2] == qtype]
                if match:
                    return "NOERROR", answers + sorted(match)
                cname = [rr for rr in at_name if rr[2] == "CNAME"]
                if cname:
                    answers.append(cname[0])
                    name = cname[0][3]
                    continue
                return "NOERROR", answers  # NODATA, or an empty non-terminal
            # A wildcard at the closest encloser answers for the name.
            encloser = parent_of(name)
            while encloser not in exists:
                encloser = parent_of(encloser)
            wild = by_owner.get("*." + encloser if encloser != "." else "*.", [])
            if wild:
                match = [(name, t, ty, d) for (_, t, ty, d) in wild if ty == qtype]
                if match:
                    return "NOERROR", answers + sorted(match)
                cname = [(name, t, ty, d) for (_, t, ty, d) in wild if ty == "CNAME"]
                if cname:
                    answers.append(cname[0])
                    name = cname[0][3]
                    continue
                return "NOERROR", answers
            return "NXDOMAIN", answers
        return "SERVFAIL", []
