-- Shared by dumpdns.lua and capture.lua: prints one DNS message as text.
local dump = {}

local function flags(m)
    local set = {}
    for _, f in ipairs { "aa", "tc", "rd", "ra", "ad", "cd" } do
        if m.flags[f] then set[#set + 1] = f end
    end
    return table.concat(set, " ")
end

local function records(title, list)
    if list == nil or #list == 0 then return end
    print("  " .. title .. ":")
    for _, r in ipairs(list) do
        print(string.format("    %s %d %s %s %s", r.name or "?", r.ttl, r.class, r.type, r.data))
    end
end

--- Prints the flow line and the message `obj` (an object with a DNS part).
function dump.message(obj)
    local m = obj.dns
    print(string.format("%s %s:%d -> %s:%d", obj.transport, obj.src, obj.sport, obj.dst, obj.dport))
    if m.id == nil then
        print("  (no DNS header)")
        return
    end
    print(string.format("  id %d %s opcode %s rcode %s flags [%s]",
        m.id, m.qr and "response" or "query", m.opcode, m.rcode, flags(m)))
    if m.qdcount ~= nil then
        print(string.format("  qd %d an %d ns %d ar %d", m.qdcount, m.ancount, m.nscount, m.arcount))
        for _, q in ipairs(m.question) do
            print(string.format("  question: %s %s %s", q.name or "?", q.class, q.type))
        end
        records("answer", m.answer)
        records("authority", m.authority)
        records("additional", m.additional)
        local edns = m.edns
        if edns ~= nil then
            print(string.format("  edns: version %d udp %d do %s", edns.version, edns.udp_size, tostring(edns["do"])))
        end
    end
    if m.error ~= nil then print("  error: " .. m.error) end
end

return dump
