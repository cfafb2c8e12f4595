package cache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/internal/safefile"
)

// allocated is how many bytes of heap f allocates. The tests that use it
// do not run in parallel, so that what other tests allocate meanwhile
// (nothing: parallel tests wait for them) does not count.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// loadSlack is what LoadFile may allocate besides what it stores: its
// buffers (64 KiB of file, an answer and a name) and the growth of the
// shards' slices and maps, which entryOverhead counts at their final size
// only.
const loadSlack = 1 << 20

// crafted is a file with a valid checksum whose one entry announces a
// name of nameLen bytes and an answer of dataLen (after what it holds).
func crafted(tb testing.TB, nameLen uint16, dataLen uint32) []byte {
	tb.Helper()
	it := item{key: Key{Name: "y.example.", Type: dns.TypeA, Class: dns.ClassINET}, stored: t0.UnixNano(), life: 60,
		data: msg{name: "y.example.", qtype: dns.TypeA, an: []string{"y.example. 60 IN A 192.0.2.1"}}.pack(tb)}
	b := fileOf(&it)
	binary.BigEndian.PutUint16(b[fileHeader:], nameLen)
	binary.BigEndian.PutUint32(b[fileHeader+2+len(it.key.Name)+2+2+1+8+4:], dataLen)
	body := len(b) - 4
	return append(b[:body], crcOf(b[:body])...)
}

// A file with a valid checksum whose lengths or count say more than it
// holds (issue 25: an answer of 0xFFFFFFF0 bytes panicked on 32 bits and
// ran out of memory on 64) is damaged: nothing is stored, and nothing is
// allocated for what the lengths announce. Before the fix, the 100 MiB
// answer was allocated (the first case fails on allocation), and the
// 0xFFFFFFF0 one panicked with GOARCH=386.
func TestLoadCraftedLengths(t *testing.T) {
	countOnly := append([]byte(fileMagic), 0, fileVersion, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF)
	countOnly = append(countOnly, crcOf(countOnly)...)
	good := crafted(t, uint16(len("y.example.")), 0)
	answerLen := len(good) - fileTrailer - binary.Size(uint32(0)) - fileHeader - entryFixed - len("y.example.")
	for _, c := range []struct {
		name string
		file []byte
	}{
		{"an answer of 100 MiB", crafted(t, uint16(len("y.example.")), 100<<20)},
		{"an answer of 0xFFFFFFF0 bytes", crafted(t, uint16(len("y.example.")), 0xFFFFFFF0)},
		{"an answer one byte past the end", crafted(t, uint16(len("y.example.")), uint32(answerLen+1))},
		{"a name of 0xFFFF bytes", crafted(t, 0xFFFF, uint32(answerLen))},
		{"a count of 0xFFFFFFFF and no entries", countOnly},
	} {
		cache := New(testConfig())
		var ld Loaded
		var err error
		a := allocated(func() { ld, err = cache.load(bytes.NewReader(c.file), int64(len(c.file)), t0) })
		if !errors.Is(err, ErrDamaged) || ld != (Loaded{}) || cache.Entries() != 0 {
			t.Fatalf("%s: load = %+v, %v; %d entries", c.name, ld, err, cache.Entries())
		}
		if a > loadSlack {
			t.Fatalf("%s: load allocated %d bytes for a file of %d", c.name, a, len(c.file))
		}
	}

	// The same from a file on disk, as the daemon reads it.
	p := filepath.Join(t.TempDir(), "cache")
	if err := os.WriteFile(p, crafted(t, uint16(len("y.example.")), 0xFFFFFFF0), 0o600); err != nil {
		t.Fatal(err)
	}
	if ld, err := New(testConfig()).LoadFile(p, t0); !errors.Is(err, ErrDamaged) || ld != (Loaded{}) {
		t.Fatalf("LoadFile = %+v, %v", ld, err)
	}
}

// boundReader reads r and records the most the cache held at each read.
type boundReader struct {
	io.ReadSeeker
	c       *Cache
	reads   int
	maxHeld int64
}

func (r *boundReader) Read(p []byte) (int, error) {
	r.reads++
	r.maxHeld = max(r.maxHeld, r.c.Bytes())
	return r.ReadSeeker.Read(p)
}

// A file of more answers than size_mib holds (saved by a bigger cache, a
// size_mib lowered since) fills the cache to its bound and no further, at
// every read of the file, and takes no more memory than what it stores:
// each entry is admitted before its answer is copied. Before the fix,
// LoadFile read the whole file and copied every entry before storing the
// first (a 16 MiB file peaked at 80 MB with size_mib = 16): it allocated
// five times what it stored.
func TestLoadBoundWhileReading(t *testing.T) {
	big := testConfig()
	big.MaxBytes = 8 << 20
	src := New(big)
	n := 0
	for ; n < 2500; n++ {
		name := sprintf("n%d.example.", n)
		m := msg{name: name, qtype: dns.TypeTXT, an: []string{sprintf(`%s 300 IN TXT "%0900d"`, name, n)}}
		if !src.Put(Key{Name: name, Type: dns.TypeTXT, Class: dns.ClassINET}, m.pack(t), t0) {
			t.Fatalf("the source cache is full at %d entries", n)
		}
	}
	path := filepath.Join(t.TempDir(), "cache")
	if err := src.SaveFile(path, t0); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	cfg := testConfig() // 1 MiB
	c := New(cfg)
	if int64(len(file)) < 2*int64(cfg.MaxBytes) || int64(len(file)) > c.FileLimit() {
		t.Fatalf("a file of %d bytes: want twice the bound, %d, and within FileLimit, %d", len(file), cfg.MaxBytes, c.FileLimit())
	}
	r := &boundReader{ReadSeeker: bytes.NewReader(file), c: c}
	var ld Loaded
	a := allocated(func() { ld, err = c.load(r, int64(len(file)), t0.Add(time.Second)) })
	if err != nil || ld.Stored == 0 || ld.Dropped == 0 || ld.Skipped != 0 || ld.Stored+ld.Dropped != n {
		t.Fatalf("load = %+v, %v; want some of %d stored, the others dropped", ld, err, n)
	}
	if a > uint64(c.Bytes())+loadSlack {
		t.Fatalf("loading %d bytes of entries (%d stored) from a file of %d allocated %d bytes", c.Bytes(), ld.Stored, len(file), a)
	}
	if r.reads < 2*len(file)/loadBuffer || r.maxHeld > int64(cfg.MaxBytes) || c.Bytes() > int64(cfg.MaxBytes) {
		t.Fatalf("%d reads; the cache held %d bytes at most while reading, %d at the end; bound %d",
			r.reads, r.maxHeld, c.Bytes(), cfg.MaxBytes)
	}
	t.Logf("file %d bytes; stored %d entries, %d bytes; allocated %d bytes", len(file), ld.Stored, c.Bytes(), a)
}

// A file past FileLimit is not read at all.
func TestLoadRefusesAFileTooLarge(t *testing.T) {
	t.Parallel()
	c := New(testConfig())
	p := filepath.Join(t.TempDir(), "cache")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, c.FileLimit()+1); err != nil { // sparse
		t.Fatal(err)
	}
	if ld, err := c.LoadFile(p, t0); !errors.Is(err, safefile.ErrTooLarge) || ld != (Loaded{}) {
		t.Fatalf("LoadFile = %+v, %v", ld, err)
	}
}
