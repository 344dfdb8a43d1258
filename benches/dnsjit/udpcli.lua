#!/usr/bin/env dnsjit
-- Baseline for benches/replay-vs-peers.sh (pair udp-ff): read a pcap with
-- input.mmpcap, parse the layers, and send every UDP DNS query payload
-- (QR = 0) with dnsjit's output.udpcli, fire and forget. Prints the number
-- of payloads sent.
--
-- Usage: dnsjit benches/dnsjit/udpcli.lua FILE HOST PORT
-- (dnsjit puts the script path in arg[1]; user arguments start at arg[2].)

local file, host, port = arg[2], arg[3], arg[4]
if file == nil or host == nil or port == nil then
    io.stderr:write("usage: dnsjit " .. tostring(arg[1]) .. " FILE HOST PORT\n")
    os.exit(2)
end

require("dnsjit.core.objects")
local input = require("dnsjit.input.mmpcap").new()
if input:open(file) ~= 0 then
    io.stderr:write("mmpcap: cannot open " .. file .. "\n")
    os.exit(1)
end
local layer = require("dnsjit.filter.layer").new()
layer:producer(input)
local output = require("dnsjit.output.udpcli").new()
if output:connect(host, port) ~= 0 then
    io.stderr:write("udpcli: cannot connect to " .. host .. ":" .. port .. "\n")
    os.exit(1)
end
local query = require("dnsjit.core.object.dns").new()

local prod, pctx = layer:produce()
local recv, rctx = output:receive()
while true do
    local obj = prod(pctx)
    if obj == nil then break end
    local pl = obj:cast()
    if obj:type() == "payload" and pl.len > 0 then
        query.obj_prev = obj
        if query:parse_header() == 0 and query.qr == 0 then
            recv(rctx, obj)
        end
    end
end
print(output:packets())
