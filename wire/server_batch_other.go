//go:build !linux

package wire

import "net"

// readUDPBatches is readUDP: batched system calls are Linux's.
func (s *Server) readUDPBatches(pc *net.UDPConn, _ int) { s.readUDP(pc) }
