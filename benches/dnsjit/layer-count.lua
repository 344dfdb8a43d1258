#!/usr/bin/env dnsjit
-- Baseline for benches/vs-dnsjit.sh: read a pcap with a dnsjit input,
-- parse the ether/IP/UDP stack with filter.layer, and count the objects
-- that come out of layer:produce() in a plain Lua loop.  Prints the count.
--
-- Usage: dnsjit benches/dnsjit/layer-count.lua <mmpcap|fpcap|pcap> FILE
--
-- Note: dnsjit puts the script path in arg[1]; user arguments start at arg[2].

local kind = arg[2]
local file = arg[3]
if kind == nil or file == nil then
    io.stderr:write("usage: dnsjit " .. tostring(arg[1]) .. " <mmpcap|fpcap|pcap> FILE\n")
    os.exit(2)
end

local input
if kind == "mmpcap" then
    input = require("dnsjit.input.mmpcap").new()
    if input:open(file) ~= 0 then
        io.stderr:write("mmpcap: cannot open " .. file .. "\n")
        os.exit(1)
    end
elseif kind == "fpcap" then
    input = require("dnsjit.input.fpcap").new()
    if input:open(file) ~= 0 then
        io.stderr:write("fpcap: cannot open " .. file .. "\n")
        os.exit(1)
    end
elseif kind == "pcap" then
    -- libpcap-based input: different open call
    input = require("dnsjit.input.pcap").new()
    if input:open_offline(file) ~= 0 then
        io.stderr:write("pcap: cannot open " .. file .. "\n")
        os.exit(1)
    end
else
    io.stderr:write("unknown input kind: " .. kind .. " (want mmpcap, fpcap or pcap)\n")
    os.exit(2)
end

local layer = require("dnsjit.filter.layer").new()
layer:producer(input)
local produce, ctx = layer:produce()

local n = 0
while true do
    local obj = produce(ctx)
    if obj == nil then break end
    n = n + 1
end

print(n)
