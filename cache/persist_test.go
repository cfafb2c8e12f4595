package cache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// savedCache saves a cache with a fresh answer, a negative one, one that
// is stale at save time, and a failure, at t0+10s; it returns the path.
func savedCache(t testing.TB) string {
	t.Helper()
	c := New(testConfig())
	nx := msg{name: "nx.example.com.", qtype: dns.TypeA, rcode: dns.RcodeNameError, ns: []string{soaRR(300, 300)}}
	old := msg{name: "old.example.", qtype: dns.TypeA, an: []string{"old.example. 5 IN A 192.0.2.5"}}
	do := keyOf(example)
	do.DO = true
	c.Put(keyOf(example), example.pack(t), t0)
	c.Put(do, example.pack(t), t0)
	c.Put(keyOf(nx), nx.pack(t), t0)
	c.Put(keyOf(old), old.pack(t), t0)
	c.PutFailure(Key{Name: "fail.example.", Type: dns.TypeA, Class: dns.ClassINET}, t0)
	path := filepath.Join(t.TempDir(), "cache.bin")
	if err := c.SaveFile(path, t0.Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPersistRoundTrip: a restart answers from the saved cache with the
// ages it had, drops failures and what is past its stale window.
func TestPersistRoundTrip(t *testing.T) {
	t.Parallel()
	path := savedCache(t)
	if m, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "*.tmp-*")); len(m) != 0 {
		t.Fatalf("temporary files left: %v", m)
	}

	c := New(testConfig())
	at := t0.Add(30 * time.Second)
	ld, err := c.LoadFile(path, at)
	if err != nil || ld != (Loaded{Stored: 4}) {
		t.Fatalf("LoadFile = %+v, %v; want 4 entries stored", ld, err)
	}
	got, st := get(t, c, keyOf(example), at, 0)
	if st != Fresh || got.Answer[1].Header().Ttl != 90 {
		t.Fatalf("loaded answer %v (%v), want TTL 120-30", got, st)
	}
	do := keyOf(example)
	do.DO = true
	if _, st := c.Get(do, at); st != Fresh {
		t.Fatalf("DO entry: %v", st)
	}
	if h, st := c.Get(Key{Name: "nx.example.com.", Type: dns.TypeA, Class: dns.ClassINET}, at); st != Fresh || h.Rcode() != dns.RcodeNameError {
		t.Fatalf("negative entry: %v", st)
	}
	if _, st := c.Get(Key{Name: "old.example.", Type: dns.TypeA, Class: dns.ClassINET}, at); st != Stale {
		t.Fatalf("stale entry: %v", st)
	}
	if _, st := c.Get(Key{Name: "fail.example.", Type: dns.TypeA, Class: dns.ClassINET}, at); st != Miss {
		t.Fatalf("a failure was saved: %v", st)
	}
	if c.Entries() != 4 || c.Bytes() <= 0 {
		t.Fatalf("%d entries, %d bytes", c.Entries(), c.Bytes())
	}

	// Past the stale window of the oldest, it is dropped on load.
	late := New(testConfig())
	ld, err = late.LoadFile(path, t0.Add(5*time.Second+testConfig().StaleMaxAge))
	if err != nil || ld != (Loaded{Stored: 3, Dropped: 1}) {
		t.Fatalf("late LoadFile = %+v, %v; want 3 stored, 1 dropped", ld, err)
	}
}

// TestLoadKeepsNewer: an entry stored since start wins over the file's.
func TestLoadKeepsNewer(t *testing.T) {
	t.Parallel()
	path := savedCache(t)
	c := New(testConfig())
	newer := example
	newer.an = []string{"www.example.com. 300 IN A 192.0.2.99"}
	c.Put(keyOf(example), newer.pack(t), t0.Add(20*time.Second))
	if ld, err := c.LoadFile(path, t0.Add(20*time.Second)); err != nil || ld != (Loaded{Stored: 3, Dropped: 1}) {
		t.Fatalf("LoadFile = %+v, %v", ld, err)
	}
	if got, _ := get(t, c, keyOf(example), t0.Add(20*time.Second), 0); len(got.Answer) != 1 {
		t.Fatalf("the file replaced a newer entry: %v", got)
	}
}

// TestLoadDamaged: every flipped byte and every cut is an error and loads
// nothing; a missing file is fs.ErrNotExist.
func TestLoadDamaged(t *testing.T) {
	t.Parallel()
	path := savedCache(t)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	try := func(name string, b []byte) {
		t.Helper()
		p := filepath.Join(dir, "damaged")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		c := New(testConfig())
		ld, err := c.LoadFile(p, t0.Add(20*time.Second))
		if !errors.Is(err, ErrDamaged) || ld != (Loaded{}) || c.Entries() != 0 {
			t.Fatalf("%s: LoadFile = %+v, %v, %d entries", name, ld, err, c.Entries())
		}
	}
	for i := range good {
		b := append([]byte(nil), good...)
		b[i] ^= 0x10
		try(sprintf("byte %d flipped", i), b)
	}
	for n := range len(good) {
		try(sprintf("cut at %d", n), good[:n])
	}
	try("another version", append([]byte("NXDC\x00\x02"), good[6:]...))

	_, err = New(testConfig()).LoadFile(filepath.Join(dir, "missing"), t0)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

// TestLoadSkipsMalformedEntries: in a file whose checksum is right, an
// entry that does not hold together (written by a faulty saver) is
// skipped, and the others are stored.
func TestLoadSkipsMalformedEntries(t *testing.T) {
	t.Parallel()
	good := item{key: Key{Name: "y.example.", Type: dns.TypeA, Class: dns.ClassINET}, stored: t0.UnixNano(), life: 60,
		data: msg{name: "y.example.", qtype: dns.TypeA, an: []string{"y.example. 60 IN A 192.0.2.1"}}.pack(t)}
	otherName := good
	otherName.key.Name = "x.example."
	noLife := good
	noLife.key.Type = dns.TypeAAAA
	noLife.life = 0
	otherType := good
	otherType.key.Type = dns.TypeMX
	b := fileOf(&otherName, &good, &otherType, &noLife)
	c := New(testConfig())
	ld, err := c.load(bytes.NewReader(b), int64(len(b)), t0)
	if err != nil || ld != (Loaded{Stored: 1, Skipped: 3}) {
		t.Fatalf("load = %+v, %v; want 1 stored, 3 skipped", ld, err)
	}
	if _, st := c.Get(good.key, t0); st != Fresh || c.Entries() != 1 {
		t.Fatalf("the good entry: %v; %d entries", st, c.Entries())
	}
}

// fileOf is the file SaveFile would write of items, however wrong they
// are, with a trailer that fits them.
func fileOf(items ...*item) []byte {
	b := append([]byte(fileMagic), 0, fileVersion, 0, 0)
	for _, it := range items {
		b = appendEntry(b, it)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(items)))
	return append(b, crcOf(b)...)
}

// TestSaveUnwritable: a directory that is not there is an error, and no
// file appears.
func TestSaveUnwritable(t *testing.T) {
	t.Parallel()
	c := New(testConfig())
	if err := c.SaveFile(filepath.Join(t.TempDir(), "no", "such", "dir", "cache"), t0); err == nil {
		t.Fatal("SaveFile into a missing directory succeeded")
	}
}

func crcOf(b []byte) []byte {
	return binary.BigEndian.AppendUint32(nil, crc32.Checksum(b, castagnoli))
}
