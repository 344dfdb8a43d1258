#!/usr/bin/env dnsjit
-- Baseline for benches/lua-vs-dnsjit.sh: for every DNS query in a pcap,
-- count queries per QTYPE and sum the lengths of the lower-cased QNAMEs, in
-- a plain Lua loop (dns:parse_header(), dns:parse_q() and label.tostring(),
-- as dnsjit's examples do).
-- Prints "queries qname_bytes" then one "qtype count" line per QTYPE.
--
-- Usage: dnsjit benches/dnsjit/qname-qtype.lua FILE
-- (dnsjit puts the script path in arg[1]; user arguments start at arg[2].)

local file = arg[2]
if file == nil then
    io.stderr:write("usage: dnsjit " .. tostring(arg[1]) .. " FILE\n")
    os.exit(2)
end

local object = require("dnsjit.core.objects")
local input = require("dnsjit.input.mmpcap").new()
local layer = require("dnsjit.filter.layer").new()
local dns = require("dnsjit.core.object.dns").new()
local label = require("dnsjit.core.object.dns.label")
local labels = label.new(127)
local q = require("dnsjit.core.object.dns.q").new()

if input:open(file) ~= 0 then
    io.stderr:write("mmpcap: cannot open " .. file .. "\n")
    os.exit(1)
end
layer:producer(input)
local produce, ctx = layer:produce()

local PAYLOAD = object.PAYLOAD
local per_qtype, queries, bytes = {}, 0, 0
while true do
    local obj = produce(ctx)
    if obj == nil then break end
    if obj.obj_type == PAYLOAD then
        dns.obj_prev = obj
        if dns:parse_header() == 0 and dns.qr == 0 and dns.qdcount > 0
            and dns:parse_q(q, labels, 127) == 0 then
            local qname = label.tostring(dns, labels, 127)
            local qtype = dns.type_tostring(q.type)
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
