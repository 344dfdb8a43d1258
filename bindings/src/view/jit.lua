-- dnsluice views for LuaJIT, read through the FFI (loaded by view/jit.rs
-- into every LuaJIT state; `ffi` is then taken out of `package.loaded`, so
-- scripts cannot reach it).
--
-- An FFI view is a small struct {slot, gen} whose metatype's __index reads
-- the slot's record (struct dnsluice_record, the same layout as
-- bindings/src/record.rs) directly: the JIT compiles `obj.dns`, `m.qr`,
-- `m.qdcount` into a few loads, with no call into Rust. The record is the
-- view's object's when its `gen` equals the view's; otherwise Rust fills it
-- (fill), or says the view is stale and the access raises an error. Strings
-- are made when asked for (text: one FFI call, then ffi.string);
-- mnemonics are cached per code. Tables (sections, flags, options) and
-- anything rare go through the light view of the same object (light), which
-- the C API path serves.
--
-- x:iter(...) on a chain of native stages returns the iterator `iterator`
-- makes: one FFI call per object (next), which pulls the object through
-- the chain in Rust.

local ffi, records_p, fill_p, text_p, next_p, lower_p, light, copy, raise, names_text, stale_msg,
      record_size = ...
local bit = require("bit")
local band, rshift = bit.band, bit.rshift

ffi.cdef [[
struct dnsluice_record {
    uint32_t gen, has;
    int64_t frame, ts_ns, ts_sec;
    uint32_t len, caplen, payload_len, dns_len, ts_nsec;
    uint16_t sport, dport, transport, ip;
    uint16_t id, flags, rcode, qdcount, ancount, nscount, arcount, qtype, qclass, udp_size;
    uint8_t edns_version, ext_rcode, edns_do, pad;
    uint32_t qname_at;
};
struct dnsluice_view { uint32_t slot, gen; };
struct dnsluice_dns { uint32_t slot, gen; };
struct dnsluice_edns { uint32_t slot, gen; };
]]
assert(ffi.sizeof("struct dnsluice_record") == record_size, "record layout differs from Rust's")

local records = ffi.cast("struct dnsluice_record *", records_p)
local fill = ffi.cast("int32_t (*)(uint32_t, uint32_t)", fill_p)
local text_c = ffi.cast("const uint8_t *(*)(uint32_t, uint32_t, uint32_t, uint32_t, size_t *)", text_p)
local next_c = ffi.cast("uint32_t (*)(void *)", next_p)
local lower_c = ffi.cast("const uint8_t *(*)(const uint8_t *, size_t)", lower_p)
local lenbuf = ffi.new("size_t[1]")
local View = ffi.typeof("struct dnsluice_view")
local I64, U64 = ffi.typeof("int64_t"), ffi.typeof("uint64_t")
-- Integers up to this magnitude are exact as numbers (wide.rs).
local EXACT = 2 ^ 53
local Dns = ffi.typeof("struct dnsluice_dns")
local Edns = ffi.typeof("struct dnsluice_edns")

-- `has` bits (record.rs).
local HAS_TS, HAS_PORTS, HAS_IP, TRUNCATED, IS_DNS = 2, 4, 8, 16, 32
local HAS_FLAGS, HAS_HEADER, HAS_QUESTION, HAS_EDNS = 64, 128, 256, 512
-- Parts (fields.rs Part) and the string fields text_c makes (jit.rs TEXT).
local PACKET, DNS, EDNS = 0, 1, 2
local T_SRC, T_DST, T_TRANSPORT, T_LINK, T_LAYER_ERROR, T_PAYLOAD = 0, 1, 2, 3, 4, 5
local T_QNAME, T_QTYPE, T_QCLASS, T_OPCODE, T_RCODE, T_ERROR, T_BYTES = 6, 7, 8, 9, 10, 11, 12

-- A string field of the object of view v (nil when the object has none).
local function text(v, part, id)
    local p = text_c(v.slot, v.gen, part, id, lenbuf)
    if p == nil then
        if lenbuf[0] ~= 0 then error(stale_msg, 3) end
        return nil
    end
    return ffi.string(p, lenbuf[0])
end

-- A mnemonic: the same for every object with that code, so cached. Codes
-- 0 to 255 (every common TYPE, CLASS, OPCODE and RCODE) are held in the
-- table's array part from the start, `false` until made: the compiled
-- lookup is then one bounds check for all of them, not a side trace for
-- every code that landed in the hash part.
local ARRAY_CODES = 256
local function cached(part, id)
    local cache = {}
    for code = 0, ARRAY_CODES - 1 do cache[code] = false end
    return function(v, code)
        local s = cache[code]
        if not s then
            s = text(v, part, id)
            if s ~= nil then cache[code] = s end
        end
        return s
    end
end
local transport_name = cached(PACKET, T_TRANSPORT)
local qtype_name, qclass_name = cached(DNS, T_QTYPE), cached(DNS, T_QCLASS)
local opcode_name, rcode_name = cached(DNS, T_OPCODE), cached(DNS, T_RCODE)

local function has(r, bits) return band(r.has, bits) ~= 0 end
local function flag(mask)
    return function(r) if has(r, HAS_FLAGS) then return band(r.flags, mask) ~= 0 end end
end
local function from_light(part, key)
    return function(_, v) return light(v.slot, v.gen, part)[key] end
end

-- Getters: (record, view) -> value, by part.
local P = {
    frame = function(r)
        local f = r.frame
        if f <= EXACT and f >= -EXACT then return tonumber(f) end
        return f
    end,
    ts = function(r) if has(r, HAS_TS) then return tonumber(r.ts_ns) / 1e9 end end,
    -- An int64_t cdata: exact (a double would round it to 256 ns).
    ts_ns = function(r) if has(r, HAS_TS) then return r.ts_ns end end,
    ts_sec = function(r) if has(r, HAS_TS) then return tonumber(r.ts_sec) end end,
    ts_nsec = function(r) if has(r, HAS_TS) then return r.ts_nsec end end,
    caplen = function(r) return r.caplen end,
    len = function(r) return r.len end,
    link = function(_, v) return text(v, PACKET, T_LINK) end,
    vlan = from_light(PACKET, "vlan"),
    ip = function(r) if has(r, HAS_IP) then return r.ip end end,
    src = function(_, v) return text(v, PACKET, T_SRC) end,
    dst = function(_, v) return text(v, PACKET, T_DST) end,
    transport = function(r, v) if r.transport ~= 0 then return transport_name(v, r.transport) end end,
    sport = function(r) if has(r, HAS_PORTS) then return r.sport end end,
    dport = function(r) if has(r, HAS_PORTS) then return r.dport end end,
    payload_len = function(r) return r.payload_len end,
    payload = function(_, v) return text(v, PACKET, T_PAYLOAD) end,
    truncated = function(r) return has(r, TRUNCATED) end,
    layer_error = function(_, v) return text(v, PACKET, T_LAYER_ERROR) end,
    dns = function(r, v) if has(r, IS_DNS) then return Dns(v.slot, v.gen) end end,
    dns_len = function(r) if has(r, IS_DNS) then return r.dns_len end end,
}
local D = {
    id = function(r) if has(r, HAS_FLAGS) then return r.id end end,
    qr = flag(0x8000), aa = flag(0x0400), tc = flag(0x0200), rd = flag(0x0100),
    ra = flag(0x0080), ad = flag(0x0020), cd = flag(0x0010),
    opcode = function(r, v)
        if has(r, HAS_FLAGS) then return opcode_name(v, band(rshift(r.flags, 11), 15)) end
    end,
    opcode_code = function(r) if has(r, HAS_FLAGS) then return band(rshift(r.flags, 11), 15) end end,
    rcode = function(r, v) if has(r, HAS_FLAGS) then return rcode_name(v, r.rcode) end end,
    rcode_code = function(r) if has(r, HAS_FLAGS) then return r.rcode end end,
    flags = from_light(DNS, "flags"),
    qdcount = function(r) if has(r, HAS_HEADER) then return r.qdcount end end,
    ancount = function(r) if has(r, HAS_HEADER) then return r.ancount end end,
    nscount = function(r) if has(r, HAS_HEADER) then return r.nscount end end,
    arcount = function(r) if has(r, HAS_HEADER) then return r.arcount end end,
    qname = function(r, v) if has(r, HAS_QUESTION) then return text(v, DNS, T_QNAME) end end,
    qtype = function(r, v) if has(r, HAS_QUESTION) then return qtype_name(v, r.qtype) end end,
    qclass = function(r, v) if has(r, HAS_QUESTION) then return qclass_name(v, r.qclass) end end,
    qtype_code = function(r) if has(r, HAS_QUESTION) then return r.qtype end end,
    qclass_code = function(r) if has(r, HAS_QUESTION) then return r.qclass end end,
    question = from_light(DNS, "question"),
    answer = from_light(DNS, "answer"),
    authority = from_light(DNS, "authority"),
    additional = from_light(DNS, "additional"),
    edns = function(r, v) if has(r, HAS_EDNS) then return Edns(v.slot, v.gen) end end,
    error = function(_, v) return text(v, DNS, T_ERROR) end,
    bytes = function(_, v) return text(v, DNS, T_BYTES) end,
}
local E = {
    version = function(r) return r.edns_version end,
    udp_size = function(r) return r.udp_size end,
    ["do"] = function(r) return r.edns_do ~= 0 end,
    ext_rcode = function(r) return r.ext_rcode end,
    options = from_light(EDNS, "options"),
}

local copiers = {}
for part = PACKET, EDNS do
    copiers[part] = function(v) return copy(light(v.slot, v.gen, part)) end
end

local function metatype(ctype, getters, part)
    ffi.metatype(ctype, {
        __index = function(v, k)
            local r = records[v.slot]
            if r.gen ~= v.gen and fill(v.slot, v.gen) ~= 0 then error(stale_msg, 2) end
            local g = getters[k]
            if g ~= nil then return g(r, v) end
            if k == "copy" then return copiers[part] end
            error("objects have no field `" .. tostring(k) .. "` (fields: " .. names_text .. ")", 2)
        end,
        __tostring = function(v) return tostring(light(v.slot, v.gen, part)) end,
    })
end
metatype(View, P, PACKET)
metatype(Dns, D, DNS)
metatype(Edns, E, EDNS)

-- The getter of a field named in iter(): the object's own, or its DNS or
-- EDNS part's (nil for an object without that part).
local function iter_getter(name)
    if P[name] then return P[name] end
    local g = D[name]
    if g then return function(r, v) if has(r, IS_DNS) then return g(r, v) end end end
    g = E[name]
    if g then
        return function(r, v) if has(r, IS_DNS) and has(r, HAS_EDNS) then return g(r, v) end end
    end
    error("iter: no field " .. tostring(name))
end

-- The iterator of a pull chain: `handle` is its Rust side (a pointer, kept
-- alive by `keep`), `slot` its cursor's slot; each call pulls the next
-- object and returns its view and the fields `names`. Code is generated per
-- list of names so that the JIT sees plain calls.
local function iterator(keep, handle, slot, ...)
    local names = { ... }
    local args, returns = { "next_c, h, slot, View, records, raise, keep" }, { "v" }
    for i = 1, #names do
        args[#args + 1] = "g" .. i
        returns[#returns + 1] = "g" .. i .. "(r, v)"
    end
    local source = "local " .. table.concat(args, ", ") .. " = ...\n"
        .. "return function()\n"
        .. "    local gen = next_c(h)\n"
        .. "    if gen == 0 then return raise(keep) end\n"
        .. "    local v = View(slot, gen)\n"
        .. "    local r = records[slot]\n"
        .. "    return " .. table.concat(returns, ", ") .. "\n"
        .. "end\n"
    local getters = {}
    for i = 1, #names do getters[i] = iter_getter(names[i]) end
    local make = assert(loadstring(source, "=dnsluice iterator"))
    return make(next_c, ffi.cast("void *", handle), slot, View, records, raise, keep,
        unpack(getters, 1, #names))
end

-- An FFI view as the light view of the same object; anything else as it is.
local function to_light(v)
    if ffi.istype(View, v) then return light(v.slot, v.gen, PACKET) end
    if ffi.istype(Dns, v) then return light(v.slot, v.gen, DNS) end
    if ffi.istype(Edns, v) then return light(v.slot, v.gen, EDNS) end
    return v
end

-- string.lower as LuaJIT's own (ASCII), through one FFI call that the JIT
-- compiles: a string with no upper-case letter is returned as it is (no new
-- string), which is what lower-casing DNS names meets most.
local lower, string_type = string.lower, type
string.lower = function(s)
    if string_type(s) ~= "string" then
        if string_type(s) == "number" then return lower(s) end
        -- LuaJIT's own message, located at the caller as its own is.
        error("bad argument #1 to 'lower' (string expected, got " .. string_type(s) .. ")", 2)
    end
    local n = #s
    local p = lower_c(s, n)
    if p == nil then return s end
    return ffi.string(p, n)
end

-- The 64-bit integer cdata hi * 2^32 + lo (wide.rs: values a double
-- cannot hold exactly; hi and lo are 32-bit halves, exact as numbers).
local function box(hi, lo, unsigned)
    return (unsigned and U64 or I64)(hi) * 4294967296 + lo
end

return iterator, to_light, box
