-- Wireshark dissector for ttemu's TT-link datagrams (docs/capture.md, docs/frame-format.md,
-- docs/packet-format.md). Load it with `wireshark -X lua_script:tools/wireshark/ttlink.lua` (or
-- copy it to ~/.local/lib/wireshark/plugins/).
--
-- Per UDP datagram: the fallback header of the Ethernet Fallback Channel if there is one, then
-- every TT-link frame packed in it (header, payload, CRC32 checked), with the hello body of a
-- HELLO, the fabric packet of a DATA frame to a packet lane address (0x1000 + lane), and the
-- credits of a DATA frame to a credit address (0x2000 + lane).
--
-- The CRC: DATA and ACK frames fold the wrap counts of their sequence numbers (never sent) into
-- the CRC once they are not zero. The check tries no wraps first, then the wraps that last
-- matched on the same UDP ports (and the counts near them), then 0-7 for each: a frame that
-- matches none of these is reported bad (ttlink.crc.status 0, expert info).
--
-- Fields: ttlink.* for the link layer, ttfabric.* for fabric packets and credits.
-- Recognised on any UDP port by a heuristic (a datagram is taken when its frames, after an
-- optional fallback header, cover it exactly); "Decode As... TTLINK" forces it.

local bit = bit32 or bit

local ttlink = Proto("ttlink", "TT-link (ttemu)")
local ttfabric = Proto("ttfabric", "TT-Fabric packet (ttemu)")

local frame_types = { [1] = "DATA", [2] = "ACK", [3] = "HELLO" }
local fallback_kinds = { [1] = "data", [2] = "probe", [3] = "probe_reply", [4] = "returned" }
local crc_statuses = { [0] = "Bad", [1] = "Good" }
local known_addrs = { [0x53540000] = "link test stream", [0x45430000] = "link ping echo",
                      [0x45430001] = "link ping reply" }
local commands = {
  [1] = "write", [2] = "read", [3] = "read_response", [4] = "atomic_inc", [5] = "atomic_read_inc",
  [6] = "ack", [7] = "nack", [8] = "socket_open", [9] = "socket_accept", [10] = "socket_credit",
  [11] = "socket_data", [12] = "socket_close", [13] = "socket_reject", [15] = "mcast_write",
}
local kLinkPacketAddr, kLinkCreditAddr, kLanes = 0x1000, 0x2000, 0x100
local kFallbackMagic, kFallbackMarker = 0x42465454, 0xFB
local kMaxPayload, kOverhead, kPacketHeader = 8192, 20, 56

local F = {
  fallback = ProtoField.none("ttlink.fallback", "Fallback header"),
  fb_magic = ProtoField.uint32("ttlink.fallback.magic", "Magic", base.HEX),
  fb_tx_port = ProtoField.uint8("ttlink.fallback.tx_port", "Link's sending port"),
  fb_rx_port = ProtoField.uint8("ttlink.fallback.rx_port", "Link's receiving port"),
  fb_kind = ProtoField.uint8("ttlink.fallback.kind", "Kind", base.DEC, fallback_kinds),
  fb_flags = ProtoField.uint8("ttlink.fallback.flags", "Flags", base.HEX),
  fb_judged = ProtoField.bool("ttlink.fallback.judged", "Judged broken by the sender", 8, nil, 0x01),
  fb_probe = ProtoField.uint32("ttlink.fallback.probe", "Probe", base.HEX),

  frame = ProtoField.none("ttlink.frame", "Frame"),
  dest_addr = ProtoField.uint32("ttlink.dest_addr", "Destination address", base.HEX),
  tx_seq = ProtoField.uint16("ttlink.tx_seq", "Sequence number (tx_seq)"),
  rx_seq = ProtoField.uint16("ttlink.rx_seq", "Acknowledgement number (rx_seq)"),
  type = ProtoField.uint8("ttlink.type", "Type", base.DEC, frame_types),
  flags = ProtoField.uint8("ttlink.flags", "Flags", base.HEX),
  nack = ProtoField.bool("ttlink.flags.nack", "NACK", 8, nil, 0x01),
  held = ProtoField.bool("ttlink.flags.held", "Held (sent without waking the peer)", 8, nil, 0x02),
  resent = ProtoField.bool("ttlink.flags.resent", "Resent (acknowledge at once)", 8, nil, 0x04),
  answer = ProtoField.bool("ttlink.flags.answer", "Answer (to a resent frame)", 8, nil, 0x08),
  length = ProtoField.uint16("ttlink.length", "Payload length"),
  session = ProtoField.uint32("ttlink.session", "Session", base.HEX),
  payload = ProtoField.bytes("ttlink.payload", "Payload"),
  crc = ProtoField.uint32("ttlink.crc", "CRC32", base.HEX),
  crc_status = ProtoField.uint8("ttlink.crc.status", "CRC32 status", base.DEC, crc_statuses),
  crc_tx_wraps = ProtoField.uint32("ttlink.crc.tx_wraps", "tx_seq wraps (sequence extension)"),
  crc_rx_wraps = ProtoField.uint32("ttlink.crc.rx_wraps", "rx_seq wraps (sequence extension)"),

  hello = ProtoField.none("ttlink.hello", "Hello"),
  h_job = ProtoField.uint64("ttlink.hello.job", "Job", base.HEX),
  h_mesh = ProtoField.uint16("ttlink.hello.mesh", "Mesh"),
  h_device = ProtoField.uint16("ttlink.hello.device", "Device"),
  h_port = ProtoField.uint8("ttlink.hello.port", "Port"),
  h_flags = ProtoField.uint8("ttlink.hello.flags", "Flags", base.HEX),
  h_up = ProtoField.bool("ttlink.hello.up", "Up", 8, nil, 0x01),
  h_askflag = ProtoField.bool("ttlink.hello.ask_flag", "Ask (answer me)", 8, nil, 0x02),
  h_ask = ProtoField.uint8("ttlink.hello.ask", "Ask token"),
  h_answer = ProtoField.uint8("ttlink.hello.answer", "Answer token"),
  h_nonce = ProtoField.uint32("ttlink.hello.nonce", "Nonce", base.HEX),
  h_peer_nonce = ProtoField.uint32("ttlink.hello.peer_nonce", "Peer nonce", base.HEX),
}
ttlink.fields = F

local P = {
  lane = ProtoField.uint8("ttfabric.lane", "Lane"),
  lane_fvc = ProtoField.uint8("ttfabric.lane.fvc", "Lane's FVC"),
  lane_answer = ProtoField.bool("ttfabric.lane.answer", "Answer lane"),
  lane_class = ProtoField.uint8("ttfabric.lane.class", "Lane's class (1: entered another mesh)"),
  src_mesh = ProtoField.uint16("ttfabric.src_mesh", "Source mesh"),
  src_device = ProtoField.uint16("ttfabric.src_device", "Source device"),
  dst_mesh = ProtoField.uint16("ttfabric.dst_mesh", "Destination mesh"),
  dst_device = ProtoField.uint16("ttfabric.dst_device", "Destination device"),
  dst_addr = ProtoField.uint64("ttfabric.dst_addr", "Destination address", base.HEX),
  return_addr = ProtoField.uint64("ttfabric.return_addr", "Return address", base.HEX),
  packet_id = ProtoField.uint64("ttfabric.packet_id", "Packet id"),
  size = ProtoField.uint32("ttfabric.size", "Size"),
  arg = ProtoField.uint32("ttfabric.arg", "Argument", base.HEX),
  command = ProtoField.uint8("ttfabric.command", "Command", base.DEC, commands),
  fvc = ProtoField.uint8("ttfabric.fvc", "FVC"),
  txn_id = ProtoField.uint8("ttfabric.txn_id", "Transaction id"),
  ttl = ProtoField.uint8("ttfabric.ttl", "TTL"),
  plane = ProtoField.uint8("ttfabric.plane", "Plane"),
  wrap = ProtoField.uint8("ttfabric.wrap", "Wrap"),
  src_core = ProtoField.uint16("ttfabric.src_core", "Source core"),
  key = ProtoField.uint64("ttfabric.key", "Key", base.HEX),
  payload = ProtoField.bytes("ttfabric.payload", "Payload"),
  credit_lane = ProtoField.uint8("ttfabric.credit.lane", "Lane"),
  credit = ProtoField.uint32("ttfabric.credit.count", "Credits returned"),
}
ttfabric.fields = P

local E = {
  bad_crc = ProtoExpert.new("ttlink.crc.bad", "Bad CRC32", expert.group.CHECKSUM, expert.severity.ERROR),
  malformed = ProtoExpert.new("ttlink.malformed", "Frame cannot be framed (length)", expert.group.MALFORMED,
                              expert.severity.ERROR),
  bad_type = ProtoExpert.new("ttlink.type.unknown", "Unknown frame type", expert.group.MALFORMED, expert.severity.WARN),
  bad_packet = ProtoExpert.new("ttfabric.malformed", "Not a well-formed packet", expert.group.MALFORMED,
                               expert.severity.WARN),
}
ttlink.experts = { E.bad_crc, E.malformed, E.bad_type }
ttfabric.experts = { E.bad_packet }

-- CRC-32/ISO-HDLC (zlib's crc32), table-driven; `crc` continues a previous value.
local crc_table = {}
for i = 0, 255 do
  local c = i
  for _ = 1, 8 do
    if bit.band(c, 1) ~= 0 then c = bit.bxor(0xEDB88320, bit.rshift(c, 1)) else c = bit.rshift(c, 1) end
  end
  crc_table[i] = c
end
local function crc32(s, crc)
  local c = bit.bnot(crc or 0)
  for i = 1, #s do
    c = bit.bxor(crc_table[bit.band(bit.bxor(c, s:byte(i)), 0xFF)], bit.rshift(c, 8))
  end
  c = bit.bnot(c)
  if c < 0 then c = c + 0x100000000 end
  return c
end
local function u64le(n)
  local lo, hi = n % 0x100000000, math.floor(n / 0x100000000)
  local t = {}
  for k = 0, 3 do t[#t + 1] = string.char(bit.band(bit.rshift(lo, 8 * k), 0xFF)) end
  for k = 0, 3 do t[#t + 1] = string.char(bit.band(bit.rshift(hi, 8 * k), 0xFF)) end
  return table.concat(t)
end

-- The wraps that last matched, by direction (UDP ports): where a long capture stands.
local last_wraps = {}

-- Checks a frame's CRC: returns good, tx_wraps, rx_wraps.
local function check_crc(body, carried, ftype, direction)
  local plain = crc32(body)
  if plain == carried then return true, 0, 0 end
  if ftype ~= 1 and ftype ~= 2 then return false end
  local tries, seen = {}, {}
  local function try(tx, rx)
    if tx < 0 or rx < 0 or (ftype == 2 and tx ~= 0) then return end
    local k = tx .. ":" .. rx
    if not seen[k] then seen[k] = true; tries[#tries + 1] = { tx, rx } end
  end
  local last = last_wraps[direction]
  if last then
    for dt = -1, 2 do for dr = -1, 2 do try(last[1] + dt, last[2] + dr) end end
  end
  for tx = 0, 7 do for rx = 0, 7 do try(tx, rx) end end
  for _, w in ipairs(tries) do
    if w[1] ~= 0 or w[2] ~= 0 then
      if crc32(u64le(w[1]) .. u64le(w[2]), plain) == carried then
        last_wraps[direction] = w
        return true, w[1], w[2]
      end
    end
  end
  return false
end

local function chip(mesh, device) return string.format("M%dD%d", mesh, device) end

-- The fabric packet of a DATA frame to a packet lane.
local function dissect_packet(tvb, tree, lane)
  local t = tree:add(ttfabric, tvb())
  t:add(P.lane, lane):set_generated()
  t:add(P.lane_fvc, math.floor(lane / 4)):set_generated()
  t:add(P.lane_answer, math.floor(lane / 2) % 2 == 1):set_generated()
  t:add(P.lane_class, lane % 2):set_generated()
  if tvb:len() < kPacketHeader then
    t:add_proto_expert_info(E.bad_packet, "Shorter than the 56-byte packet header")
    return "?"
  end
  local cmd = tvb(40, 1):uint()
  t:add_le(P.src_mesh, tvb(0, 2)); t:add_le(P.src_device, tvb(2, 2))
  t:add_le(P.dst_mesh, tvb(4, 2)); t:add_le(P.dst_device, tvb(6, 2))
  t:add_le(P.dst_addr, tvb(8, 8)); t:add_le(P.return_addr, tvb(16, 8))
  t:add_le(P.packet_id, tvb(24, 8)); t:add_le(P.size, tvb(32, 4)); t:add_le(P.arg, tvb(36, 4))
  t:add(P.command, tvb(40, 1)); t:add(P.fvc, tvb(41, 1)); t:add(P.txn_id, tvb(42, 1))
  t:add(P.ttl, tvb(43, 1)); t:add(P.plane, tvb(44, 1)); t:add(P.wrap, tvb(45, 1))
  t:add_le(P.src_core, tvb(46, 2)); t:add_le(P.key, tvb(48, 8))
  local size, rest = tvb(32, 4):le_uint(), tvb:len() - kPacketHeader
  if rest > 0 then t:add(P.payload, tvb(kPacketHeader, rest)) end
  if (cmd == 2 and rest ~= 0) or (cmd ~= 2 and rest ~= size) then
    t:add_proto_expert_info(E.bad_packet, "The payload does not match the size")
  end
  local src = chip(tvb(0, 2):le_uint(), tvb(2, 2):le_uint())
  local dst = chip(tvb(4, 2):le_uint(), tvb(6, 2):le_uint())
  local text = string.format("%s %s->%s id %s", commands[cmd] or ("command " .. cmd), src, dst,
                             tostring(tvb(24, 8):le_uint64()))
  t:append_text(": " .. text)
  return text
end

local function dissect_hello(tvb, tree)
  local t = tree:add(F.hello, tvb())
  if tvb:len() ~= 24 then return end
  t:add_le(F.h_job, tvb(0, 8)); t:add_le(F.h_mesh, tvb(8, 2)); t:add_le(F.h_device, tvb(10, 2))
  t:add(F.h_port, tvb(12, 1))
  local fl = t:add(F.h_flags, tvb(13, 1))
  fl:add(F.h_up, tvb(13, 1)); fl:add(F.h_askflag, tvb(13, 1))
  t:add(F.h_ask, tvb(14, 1)); t:add(F.h_answer, tvb(15, 1))
  t:add_le(F.h_nonce, tvb(16, 4)); t:add_le(F.h_peer_nonce, tvb(20, 4))
  t:append_text(string.format(": %sP%d", chip(tvb(8, 2):le_uint(), tvb(10, 2):le_uint()), tvb(12, 1):uint()))
end

-- The lane a DATA frame's dest_addr names in the lane addresses starting at `base`, or nil.
local function lane_at(ftype, dest, base)
  if ftype == 1 and dest >= base and dest < base + kLanes then return dest - base end
end

-- One frame at off (its length already checked); returns a summary for the Info column.
local function dissect_frame(tvb, tree, off, direction)
  local len = tvb(off + 10, 2):le_uint()
  local ftype, dest = tvb(off + 8, 1):uint(), tvb(off, 4):le_uint()
  local packet_lane, credit_lane = lane_at(ftype, dest, kLinkPacketAddr), lane_at(ftype, dest, kLinkCreditAddr)
  local t = tree:add(F.frame, tvb(off, kOverhead + len))
  local da = t:add_le(F.dest_addr, tvb(off, 4))
  if packet_lane then
    da:append_text(string.format(" (packet, lane %d)", packet_lane))
  elseif credit_lane then
    da:append_text(string.format(" (credits, lane %d)", credit_lane))
  elseif known_addrs[dest] then
    da:append_text(" (" .. known_addrs[dest] .. ")")
  end
  t:add_le(F.tx_seq, tvb(off + 4, 2)); t:add_le(F.rx_seq, tvb(off + 6, 2))
  t:add(F.type, tvb(off + 8, 1))
  local fl = t:add(F.flags, tvb(off + 9, 1))
  fl:add(F.nack, tvb(off + 9, 1))
  fl:add(F.held, tvb(off + 9, 1))
  fl:add(F.resent, tvb(off + 9, 1))
  fl:add(F.answer, tvb(off + 9, 1))
  t:add_le(F.length, tvb(off + 10, 2)); t:add_le(F.session, tvb(off + 12, 4))
  local name = frame_types[ftype] or ("type " .. ftype)
  local text = string.format("%s %d/%d", name, tvb(off + 4, 2):le_uint(), tvb(off + 6, 2):le_uint())
  if bit.band(tvb(off + 9, 1):uint(), 1) ~= 0 then text = text .. " NACK" end
  if bit.band(tvb(off + 9, 1):uint(), 2) ~= 0 then text = text .. " held" end
  if bit.band(tvb(off + 9, 1):uint(), 4) ~= 0 then text = text .. " resent" end
  if bit.band(tvb(off + 9, 1):uint(), 8) ~= 0 then text = text .. " answer" end
  if not frame_types[ftype] then t:add_proto_expert_info(E.bad_type) end
  if len > 0 then
    local body = tvb(off + 16, len):tvb()
    if ftype == 3 then
      dissect_hello(body, t)
    elseif packet_lane then
      text = text .. " " .. dissect_packet(body, t, packet_lane)
    elseif credit_lane and len == 4 then
      local credits = tvb(off + 16, 4):le_uint()
      local c = t:add(ttfabric, tvb(off + 16, len), "TT-Fabric credits")
      c:add(P.credit_lane, credit_lane):set_generated()
      c:add_le(P.credit, tvb(off + 16, 4))
      c:append_text(string.format(": %d on lane %d", credits, credit_lane))
      text = text .. string.format(" credit %d lane %d", credits, credit_lane)
    else
      t:add(F.payload, tvb(off + 16, len))
    end
  end
  local carried = tvb(off + 16 + len, 4):le_uint()
  local citem = t:add_le(F.crc, tvb(off + 16 + len, 4))
  local good, txw, rxw = check_crc(tvb(off, 16 + len):raw(), carried, ftype, direction)
  citem:add(F.crc_status, good and 1 or 0):set_generated()
  if good and (txw ~= 0 or rxw ~= 0) then
    citem:add(F.crc_tx_wraps, txw):set_generated()
    citem:add(F.crc_rx_wraps, rxw):set_generated()
  end
  if not good then
    citem:add_proto_expert_info(E.bad_crc)
    text = text .. " [bad CRC]"
  end
  t:append_text(": " .. text)
  return text
end

-- Whether the datagram is TT-link: the frames after an optional fallback header cover it exactly.
local function has_fallback(tvb)
  return tvb:len() >= 16 and tvb(0, 4):le_uint() == kFallbackMagic and tvb(8, 1):uint() == kFallbackMarker
end
local function looks_like_ttlink(tvb)
  local off, n = has_fallback(tvb) and 16 or 0, tvb:len()
  if off == 16 and n == 16 then return true end
  if n - off < kOverhead then return false end
  while off < n do
    if n - off < kOverhead then return false end
    local t, len = tvb(off + 8, 1):uint(), tvb(off + 10, 2):le_uint()
    if t < 1 or t > 3 or len > kMaxPayload or off + kOverhead + len > n then return false end
    off = off + kOverhead + len
  end
  return true
end

function ttlink.dissector(tvb, pinfo, tree)
  pinfo.cols.protocol = "TT-link"
  local root = tree:add(ttlink, tvb())
  local off, n = 0, tvb:len()
  local parts = {}
  if has_fallback(tvb) then
    local f = root:add(F.fallback, tvb(0, 16))
    f:add_le(F.fb_magic, tvb(0, 4)); f:add(F.fb_tx_port, tvb(4, 1)); f:add(F.fb_rx_port, tvb(5, 1))
    f:add(F.fb_kind, tvb(6, 1))
    local fl = f:add(F.fb_flags, tvb(7, 1))
    fl:add(F.fb_judged, tvb(7, 1))
    f:add_le(F.fb_probe, tvb(12, 4))
    parts[#parts + 1] = string.format("fallback %s P%d->P%d", fallback_kinds[tvb(6, 1):uint()] or "?",
                                      tvb(4, 1):uint(), tvb(5, 1):uint())
    off = 16
  end
  local direction = tostring(pinfo.src_port) .. ">" .. tostring(pinfo.dst_port)
  local frames = 0
  while off < n do
    local len = n - off >= kOverhead and tvb(off + 10, 2):le_uint() or nil
    if not len or len > kMaxPayload or off + kOverhead + len > n then
      root:add_proto_expert_info(E.malformed)
      parts[#parts + 1] = "[malformed]"
      break
    end
    parts[#parts + 1] = dissect_frame(tvb, root, off, direction)
    frames = frames + 1
    off = off + kOverhead + len
  end
  root:append_text(string.format(", %d frame(s)", frames))
  pinfo.cols.info = table.concat(parts, "; ")
  return n
end

ttlink:register_heuristic("udp", function(tvb, pinfo, tree)
  if not looks_like_ttlink(tvb) then return false end
  ttlink.dissector(tvb, pinfo, tree)
  return true
end)
DissectorTable.get("udp.port"):add_for_decode_as(ttlink)
