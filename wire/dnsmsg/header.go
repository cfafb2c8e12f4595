package dnsmsg

import "encoding/binary"

// HeaderLen is a DNS message header's length (RFC 1035 4.1.1): anything
// shorter is not a message.
const HeaderLen = 12

// Header flags: bits of the 16-bit word at offset 2 of a message (RFC 1035
// 4.1.1, RFC 4035 3.2 for AD and CD). Read it with Flags.
const (
	FlagQR     uint16 = 1 << 15   // a response
	MaskOpcode uint16 = 0xF << 11 // the opcode, 0 for QUERY
	FlagTC     uint16 = 1 << 9    // truncated
	FlagRD     uint16 = 1 << 8    // recursion desired
	FlagRA     uint16 = 1 << 7    // recursion available
	FlagAD     uint16 = 1 << 5    // authentic data
	FlagCD     uint16 = 1 << 4    // checking disabled
	MaskRcode  uint16 = 0xF       // the rcode's low four bits
)

// EDNSSize is the EDNS UDP payload size nxdnsd advertises, to clients and
// upstreams alike: 1232 bytes, the DNS Flag Day 2020 value, which avoids IP
// fragmentation on nearly every path.
const EDNSSize = 1232

// Flags returns the flags word of msg, which must be at least HeaderLen
// long.
func Flags(msg []byte) uint16 { return binary.BigEndian.Uint16(msg[2:]) }
