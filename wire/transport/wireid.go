package transport

import (
	crand "crypto/rand"
	"math/rand/v2"
	"sync"
)

// wireIDs holds the generators newWireID draws from: ChaCha8, each seeded
// with 32 bytes from crypto/rand. A wire ID is half of what an off-path
// spoofer must guess (the source port is the other, RFC 5452), so it comes
// from a generator meant for secrets: math/rand/v2 documents ChaCha8 as
// cryptographically strong, and its output cannot be predicted without the
// seed, which only crypto/rand has seen. Its package-level functions use a
// generator of the same kind today, but that package's doc says not to use
// them for security-sensitive work, and promises nothing about them.
//
// A ChaCha8 is not safe for concurrent use: each goroutine takes one from
// the pool, draws, and puts it back. Get and Put of a pointer allocate
// nothing; a generator the garbage collector drops is replaced by a freshly
// seeded one. crypto/rand itself would cost a system call per ID where the
// kernel has no vDSO getrandom, and a buffer of its bytes shared by every
// exchange would need a lock.
var wireIDs = sync.Pool{New: func() any {
	var seed [32]byte
	_, _ = crand.Read(seed[:]) // never fails (crypto/rand)
	return rand.NewChaCha8(seed)
}}

// newWireID returns a random message ID. Transports send their own IDs so
// that the client's ID never reaches an upstream, and one query attempted
// on several upstreams is never sent twice with one ID.
func newWireID() uint16 {
	g := wireIDs.Get().(*rand.ChaCha8)
	id := uint16(g.Uint64())
	wireIDs.Put(g)
	return id
}
