// Package cache is nxdnsd's answer cache (spec section 10): upstream
// answers kept as wire bytes, served to later clients with their own ID
// and question spelling and aged TTLs, without unpacking or repacking.
//
// # Use
//
// The query path looks a question up with Get. A Fresh Hit is answered
// with AppendAnswer (then the client's OPT); a Stale one too, with the
// stale TTL, when resolution fails or is slow (RFC 8767); a Failure is a
// remembered failure (RFC 9520): SERVFAIL with EDE 13, nothing sent
// upstream. On a Miss the query is resolved and Put stores the answer, or
// PutFailure remembers the failure. A hit that PrefetchDue reports starts
// one background refresh per entry: ClaimRefresh, then Put, or Release.
// A stale entry's refresh that gets an answer Put declines (TTL 0, an
// NXDOMAIN without SOA) ends the entry with DropStale: a fresh answer is
// never replaced by a stale one.
// SaveFile and LoadFile keep the cache across a restart; LoadFile reads
// its file with fixed buffers, checks every length before reading what it
// announces, and admits each entry against the bound as it reads it.
//
// Put decides what is cacheable and for how long by the RFCs (see Put);
// it walks the answer's bytes itself, allocation-free, and copies what it
// keeps into one allocation. It assumes, as every DNS encoder does, that
// compression pointers lead to names: one that led into a record's TTL
// would read otherwise once the cache rewrites that TTL.
//
// # Store
//
// The entries lie in 1 to 64 shards (at least 256 KiB of MaxBytes each),
// each a read-write lock over a dense slice of entries and a map from key
// hash to position. A lookup is one read lock and one map access; the
// entry is copied out, so a Hit stays valid whatever happens to the entry
// later. Memory is bounded per shard by an entry's answer bytes as
// allocated, its name, and a fixed overhead for its slot and index
// (entryOverhead, checked against the heap by TestMemoryBound).
//
// When a shard is full, a new entry must win its place: every lookup
// counts its key in a count-min sketch of 4-bit counters that halve
// periodically (TinyLFU), and a new entry goes in only if its key was
// asked for more often than each entry it pushes out, the victim being the
// least asked of 5 sampled entries (entries past their stale window go
// first, uncompared). A flood of one-off names, each asked once, is
// turned away before Put copies it, and the names a network asks again and
// again stay.
//
// # Why not otter
//
// github.com/maypok86/otter/v2 (v2.4.0; W-TinyLFU with a window, a
// weigher, per-entry expiry) was measured against this store with the
// same Cache around it, the same tests and benchmarks, on two shared
// cores (three interleaved runs, ranges; the flood is
// TestFloodKeepsHotNames, the heap TestMemoryBound):
//
//	                                     this store             otter
//	Get, hit, 2 goroutines               49-60 ns, 0 allocs     80-81 ns, 0 allocs
//	Get, miss                            63 ns, 0 allocs        117-119 ns, 0 allocs
//	Get + AppendAnswer, 2 goroutines     89-110 ns, 0 allocs    121-125 ns, 0 allocs
//	Put, a new name                      520-740 ns, 1 alloc    1.2-1.7 µs, 3 allocs
//	Put over a fresh entry               251-271 ns, 1 alloc    1.00-1.05 µs, 3 allocs
//	one-off name, full cache (Get, Put)  628-635 ns, 0 allocs   1.09-1.12 µs, 4 allocs
//	hot names' hits under the flood      98.1-98.6 %            94.0-95.1 %
//	heap / Bytes, the same weigher       0.89-0.98              1.01-1.59
//
// otter costs the miss path three or four allocations where the query
// path's budget is one; it admits every new entry into its window and
// evicts later, so a flood costs an allocation and an eviction per name;
// its entries cost some 75 bytes more each as it fills, and under churn
// its heap kept growing past what its weigher counted (1.59 times after
// 200,000 one-off names), so an honest bound would need a larger and
// moving overhead; its weighted size lags its writes; and it runs a
// clean-up goroutine per cache. Its window favours new names asked again
// at once; here such a name wins its place at its second lookup.
package cache
