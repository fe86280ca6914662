-- ddp-sctp.lua: a Wireshark dissector for DDP over SCTP (RFC 5043), with
-- the enhanced session control of RFC 6581 §7 and §9.
--
-- It registers on the SCTP Payload Protocol Identifiers of RFC 5043 §12:
--   16  DDP Segment Chunk (§5.2.2): DDP-SSN, then one DDP Segment, which is
--       handed to Wireshark's own "iwarp_ddp_rdmap" dissector (DDP and RDMAP
--       headers, Read Requests, Terminate messages);
--   17  DDP Stream Session Control (§5.2.3): DDP-SSN, Function Code, then
--       Private Data; the enhanced function codes 5-7 of RFC 6581 start
--       their Private Data with the IRD/ORD field (A, B, IRD, C, D, ORD).
--
-- Use:
--   tshark -X lua_script:docs/wireshark/ddp-sctp.lua -r serve.pcap -V \
--       --disable-heuristic rpcrdma_iwarp --disable-heuristic smb_direct_iwarp
-- (Wireshark 4.0's RPC-over-RDMA and SMB Direct heuristics otherwise try
-- every Send payload and mark short ones malformed; in the GUI, untick
-- them under Analyze > Enabled Protocols.)
-- or copy the file into Wireshark's personal Lua plugins folder
-- (Help > About Wireshark > Folders).
--
-- A live capture of "iwarp serve" or "iwarp perf" over sctp:// is SCTP
-- over DTLS over UDP. Give Wireshark the DTLS keys the tool writes with
-- --keylog FILE (Preferences > Protocols > TLS > (Pre)-Master-Secret log
-- filename, which DTLS uses too; in tshark -o tls.keylog_file:FILE); if
-- Wireshark does not recognize the UDP port as DTLS by itself, Decode As
-- DTLS (tshark -d udp.port==PORT,dtls). The heuristic at the end of this
-- file then passes the decrypted SCTP packets to the SCTP dissector, and
-- SCTP passes PPIDs 16 and 17 here.

local ddpsctp = Proto("ddp_sctp", "DDP over SCTP (RFC 5043)")

local function_codes = {
	[1] = "DDP Stream Session Initiate",
	[2] = "DDP Stream Session Accept",
	[3] = "DDP Stream Session Reject",
	[4] = "DDP Stream Session Terminate",
	[5] = "Enhanced DDP Stream Session Initiate",
	[6] = "Enhanced DDP Stream Session Accept",
	[7] = "Enhanced DDP Stream Session Reject",
}

local pf = {
	ssn = ProtoField.uint16("ddp_sctp.ssn", "DDP-SSN", base.DEC),
	kind = ProtoField.string("ddp_sctp.kind", "Chunk"),
	func = ProtoField.uint16("ddp_sctp.function", "Function Code", base.HEX, function_codes),
	private_len = ProtoField.uint16("ddp_sctp.private_data_len", "Private Data Length", base.DEC),
	private = ProtoField.bytes("ddp_sctp.private_data", "Private Data"),
	ulp_private = ProtoField.bytes("ddp_sctp.ulp_private_data", "ULP Private Data"),
	irdord = ProtoField.bytes("ddp_sctp.irdord", "IRD/ORD (RFC 6581 §9)"),
	flag_a = ProtoField.bool("ddp_sctp.a", "A: peer-to-peer connection model", 16, nil, 0x8000),
	flag_b = ProtoField.bool("ddp_sctp.b", "B: zero-length Send RTR", 16, nil, 0x4000),
	ird = ProtoField.uint16("ddp_sctp.ird", "IRD", base.DEC, nil, 0x3FFF),
	flag_c = ProtoField.bool("ddp_sctp.c", "C: zero-length RDMA Write RTR", 16, nil, 0x8000),
	flag_d = ProtoField.bool("ddp_sctp.d", "D: zero-length RDMA Read RTR", 16, nil, 0x4000),
	ord = ProtoField.uint16("ddp_sctp.ord", "ORD", base.DEC, nil, 0x3FFF),
}
ddpsctp.fields = {
	pf.ssn, pf.kind, pf.func, pf.private_len, pf.private, pf.ulp_private,
	pf.irdord, pf.flag_a, pf.flag_b, pf.ird, pf.flag_c, pf.flag_d, pf.ord,
}

local ef = {
	short = ProtoExpert.new("ddp_sctp.short", "Chunk shorter than its fixed fields",
		expert.group.MALFORMED, expert.severity.ERROR),
	unknown_func = ProtoExpert.new("ddp_sctp.function.unknown", "Unassigned Function Code",
		expert.group.PROTOCOL, expert.severity.WARN),
	too_much = ProtoExpert.new("ddp_sctp.private_data.too_long", "Private Data longer than 512 octets (RFC 5043 §5.2.3)",
		expert.group.PROTOCOL, expert.severity.WARN),
	terminate_data = ProtoExpert.new("ddp_sctp.terminate.private_data", "Private Data in a Terminate (RFC 5043 §5.2.3 forbids it)",
		expert.group.PROTOCOL, expert.severity.WARN),
}
ddpsctp.experts = { ef.short, ef.unknown_func, ef.too_much, ef.terminate_data }

local iwarp = Dissector.get("iwarp_ddp_rdmap")

-- DDP Segment Chunk, PPID 16.
local function dissect_segment(tvb, pinfo, tree)
	local len = tvb:len()
	local t = tree:add(ddpsctp, tvb(), "DDP over SCTP, DDP Segment Chunk")
	t:add(pf.kind, "DDP Segment"):set_generated()
	if len < 2 then
		t:add_proto_expert_info(ef.short)
		return len
	end
	local ssn = tvb(0, 2):uint()
	t:add(pf.ssn, tvb(0, 2))
	t:append_text(string.format(", DDP-SSN %d", ssn))
	if len > 2 then
		-- Wireshark's iWARP dissector reads the DDP and RDMAP headers and
		-- sets the Info column itself; the DDP-SSN is appended after.
		iwarp:call(tvb(2):tvb(), pinfo, tree)
	end
	pinfo.cols.protocol:set("DDP/SCTP")
	pinfo.cols.info:append(string.format(" [DDP-SSN %d]", ssn))
	return len
end

-- DDP Stream Session Control, PPID 17.
local function dissect_control(tvb, pinfo, tree)
	local len = tvb:len()
	pinfo.cols.protocol:set("DDP/SCTP")
	local t = tree:add(ddpsctp, tvb(), "DDP over SCTP, DDP Stream Session Control")
	t:add(pf.kind, "DDP Stream Session Control"):set_generated()
	if len < 4 then
		t:add_proto_expert_info(ef.short)
		return len
	end
	local ssn = tvb(0, 2):uint()
	local code = tvb(2, 2):uint()
	t:add(pf.ssn, tvb(0, 2))
	local fi = t:add(pf.func, tvb(2, 2))
	local name = function_codes[code]
	if name == nil then
		fi:add_proto_expert_info(ef.unknown_func)
		name = string.format("Function Code 0x%04x", code)
	end
	t:append_text(string.format(", %s, DDP-SSN %d", name, ssn))
	pinfo.cols.info:set(string.format("%s [DDP-SSN %d]", name, ssn))

	local plen = len - 4
	t:add(pf.private_len, plen):set_generated()
	if plen > 512 then
		t:add_proto_expert_info(ef.too_much)
	end
	if code == 4 and plen > 0 then
		t:add_proto_expert_info(ef.terminate_data)
	end
	if plen == 0 then
		return len
	end
	local pt = t:add(pf.private, tvb(4))
	if code >= 5 and code <= 7 then
		if plen < 4 then
			pt:add_proto_expert_info(ef.short)
			return len
		end
		local io = pt:add(pf.irdord, tvb(4, 4))
		io:add(pf.flag_a, tvb(4, 2))
		io:add(pf.flag_b, tvb(4, 2))
		io:add(pf.ird, tvb(4, 2))
		io:add(pf.flag_c, tvb(6, 2))
		io:add(pf.flag_d, tvb(6, 2))
		io:add(pf.ord, tvb(6, 2))
		local ird = bit.band(tvb(4, 2):uint(), 0x3FFF)
		local ord = bit.band(tvb(6, 2):uint(), 0x3FFF)
		io:append_text(string.format(": IRD %d, ORD %d", ird, ord))
		pinfo.cols.info:append(string.format(" IRD %d ORD %d", ird, ord))
		if plen > 4 then
			pt:add(pf.ulp_private, tvb(8))
		end
	else
		pt:add(pf.ulp_private, tvb(4))
	end
	return len
end

local seg = Proto("ddp_sctp_segment", "DDP over SCTP Segment Chunk")
function seg.dissector(tvb, pinfo, tree)
	return dissect_segment(tvb, pinfo, tree)
end

local ctl = Proto("ddp_sctp_control", "DDP over SCTP Stream Session Control")
function ctl.dissector(tvb, pinfo, tree)
	return dissect_control(tvb, pinfo, tree)
end

local ppi = DissectorTable.get("sctp.ppi")
ppi:add(16, seg)
ppi:add(17, ctl)

-- SCTP over DTLS (RFC 8261), as "iwarp serve" and "iwarp perf" run it
-- for sctp://: once Wireshark has decrypted a DTLS record (with the keys
-- of --keylog), this heuristic hands its contents to the SCTP dissector
-- if they look like an SCTP packet: a common header with non-zero ports,
-- then a chunk whose type is a known one and whose length fits.
local sctp = Dissector.get("sctp")
local known_chunk = {}
for _, t in ipairs({ 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 64, 128, 130, 192, 193 }) do
	known_chunk[t] = true
end
local function sctp_over_dtls(tvb, pinfo, tree)
	local len = tvb:len()
	if len < 16 then
		return false
	end
	if tvb(0, 2):uint() == 0 or tvb(2, 2):uint() == 0 then
		return false
	end
	local clen = tvb(14, 2):uint()
	if not known_chunk[tvb(12, 1):uint()] or clen < 4 or clen > len - 12 then
		return false
	end
	sctp:call(tvb, pinfo, tree)
	return true
end
local heur = Proto("ddp_sctp_dtls", "SCTP over DTLS (for DDP over SCTP)")
heur.dissector = sctp_over_dtls
heur:register_heuristic("dtls", sctp_over_dtls)
