#!/usr/bin/env -S dnsluice script
-- benches/lua-vs-dnsjit.sh, our side with iter(): the loop of
-- benches/lua/natural.lua, the fields named once in iter() and handed over
-- with each object. For every DNS query: count queries per QTYPE and sum the
-- lengths of the lower-cased QNAMEs.
-- Prints "queries qname_bytes" then one "qtype count" line per QTYPE.
--
-- Usage: dnsluice script benches/lua/qname-qtype.lua FILE [--one-thread]

local file = arg[1]
if file == nil then
    io.stderr:write("usage: dnsluice script " .. arg[0] .. " FILE\n")
    os.exit(2)
end

-- `--one-thread`: no mmpcap helper thread (the whole run on one core, as dnsjit).
local input = require("dnsluice.input.mmpcap").new { path = file, helper = arg[2] ~= "--one-thread" }
local layer = require("dnsluice.filter.layer").new()
local dns = require("dnsluice.filter.dns").new()
dns:producer(layer:producer(input))

local per_qtype, queries, bytes = {}, 0, 0
for _, qr, qdcount, qname, qtype in dns:iter("qr", "qdcount", "qname", "qtype") do
    if qr == false and qdcount > 0 and qname ~= nil then
        per_qtype[qtype] = (per_qtype[qtype] or 0) + 1
        queries = queries + 1
        bytes = bytes + #string.lower(qname)
    end
end

print(queries .. " " .. bytes)
local names = {}
for name in pairs(per_qtype) do names[#names + 1] = name end
table.sort(names)
for _, name in ipairs(names) do print(name .. " " .. per_qtype[name]) end
