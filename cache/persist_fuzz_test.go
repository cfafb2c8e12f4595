package cache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// FuzzLoad feeds the warm-restart reader arbitrary files, with their
// checksum made right when fixCRC is set (else the fuzzer would hardly get
// past it). The reader must not panic, nor allocate what a length says
// before checking it (a 32-bit build too: CI runs this package's tests,
// seeds included, with GOARCH=386); a damaged file stores nothing; a sound
// one accounts for every entry of its trailer's count, and the cache stays
// within its bound and consistent.
func FuzzLoad(f *testing.F) {
	good, err := os.ReadFile(savedCache(f))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good, false)
	f.Add(crafted(f, uint16(len("y.example.")), 0xFFFFFFF0), false) // issue 25
	f.Add(crafted(f, 0xFFFF, 0), true)
	it := item{key: Key{Name: "y.example.", Type: dns.TypeA, Class: dns.ClassINET}, stored: t0.UnixNano(), life: 60,
		data: msg{name: "y.example.", qtype: dns.TypeA, an: []string{"y.example. 60 IN A 192.0.2.1"}}.pack(f)}
	f.Add(fileOf(&it, &it), true)
	f.Add([]byte(nil), true)
	f.Fuzz(func(t *testing.T, b []byte, fixCRC bool) {
		if fixCRC && len(b) >= 4 {
			b = append(b[:len(b)-4:len(b)-4], crcOf(b[:len(b)-4])...)
		}
		cfg := testConfig()
		cfg.MaxBytes = 256 << 10
		c := New(cfg)
		ld, err := c.load(bytes.NewReader(b), int64(len(b)), t0.Add(time.Second))
		if err != nil {
			if !errors.Is(err, ErrDamaged) || ld != (Loaded{}) || c.Entries() != 0 {
				t.Fatalf("load = %+v, %v; %d entries", ld, err, c.Entries())
			}
			return
		}
		count := int(binary.BigEndian.Uint32(b[len(b)-8:]))
		if ld.Stored+ld.Skipped+ld.Dropped != count || ld.Stored != c.Entries() || c.Bytes() > int64(cfg.MaxBytes) {
			t.Fatalf("load = %+v of %d entries; the cache holds %d, %d bytes", ld, count, c.Entries(), c.Bytes())
		}
		for i := range c.shards {
			s := &c.shards[i]
			sum := 0
			for j, sl := range s.items {
				sum += sl.it.cost()
				if s.index[sl.h] != int32(j) || sl.h != c.hash(sl.it.key) {
					t.Fatalf("shard %d: item %d misplaced", i, j)
				}
				if _, st := c.Get(sl.it.key, t0.Add(time.Second)); st != Fresh && st != Stale {
					t.Fatalf("%v stored, then %v", sl.it.key, st)
				}
			}
			if sum != s.bytes || s.bytes > c.budget {
				t.Fatalf("shard %d: %d bytes counted, %d held, budget %d", i, s.bytes, sum, c.budget)
			}
		}
	})
}
