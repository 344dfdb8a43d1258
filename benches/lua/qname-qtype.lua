#!/usr/bin/env -S dnsluice script
-- benches/lua-vs-dnsjit.sh, our side: for every DNS query in a pcap, read the
-- QNAME as a Lua string and the QTYPE, count queries per QTYPE and sum the
-- QNAME lengths, in a plain Lua loop over a pull chain (the fields come
-- with each object from iter(), one call into Rust per message).
-- Prints "queries qname_bytes" then one "qtype count" line per QTYPE.
--
-- Usage: dnsluice script benches/lua/qname-qtype.lua FILE

local file = arg[1]
if file == nil then
    io.stderr:write("usage: dnsluice script " .. arg[0] .. " FILE\n")
    os.exit(2)
end

local input = require("dnsluice.input.mmpcap").new { path = file }
local layer = require("dnsluice.filter.layer").new()
local dns = require("dnsluice.filter.dns").new()
dns:producer(layer:producer(input))

local per_qtype, queries, bytes = {}, 0, 0
-- The fields named in iter() come with each object: one call per message.
for _, qr, qname, qtype in dns:iter("qr", "qname", "qtype") do
    if qr == false and qname ~= nil then
        per_qtype[qtype] = (per_qtype[qtype] or 0) + 1
        queries = queries + 1
        bytes = bytes + #qname
    end
end

print(queries .. " " .. bytes)
local names = {}
for name in pairs(per_qtype) do names[#names + 1] = name end
table.sort(names)
for _, name in ipairs(names) do print(name .. " " .. per_qtype[name]) end
