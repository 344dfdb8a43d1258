#!/usr/bin/env -S dnsluice script
-- benches/lua-vs-dnsjit.sh, our side in the natural style: the loop someone
-- porting a dnsjit script writes, reading each object's fields by name
-- (obj.dns, m.qr, m.qdcount, m.qname, m.qtype). For every DNS query: count
-- queries per QTYPE and sum the lengths of the lower-cased QNAMEs.
-- Prints "queries qname_bytes" then one "qtype count" line per QTYPE.
--
-- Usage: dnsluice script benches/lua/natural.lua FILE [--one-thread]

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
for obj in dns:iter() do
    local m = obj.dns
    if m ~= nil and not m.qr and m.qdcount > 0 then
        local qname = m.qname
        if qname ~= nil then
            local qtype = m.qtype
            per_qtype[qtype] = (per_qtype[qtype] or 0) + 1
            queries = queries + 1
            bytes = bytes + #string.lower(qname)
        end
    end
end

print(queries .. " " .. bytes)
local names = {}
for name in pairs(per_qtype) do names[#names + 1] = name end
table.sort(names)
for _, name in ipairs(names) do print(name .. " " .. per_qtype[name]) end
