package cache

import (
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
func savedCache(t *testing.T) string {
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
	n, err := c.LoadFile(path, at)
	if err != nil || n != 4 {
		t.Fatalf("LoadFile = %d, %v; want 4 entries", n, err)
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
	n, err = late.LoadFile(path, t0.Add(5*time.Second+testConfig().StaleMaxAge))
	if err != nil || n != 3 {
		t.Fatalf("late LoadFile = %d, %v; want 3", n, err)
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
	if n, err := c.LoadFile(path, t0.Add(20*time.Second)); err != nil || n != 3 {
		t.Fatalf("LoadFile = %d, %v", n, err)
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
		n, err := c.LoadFile(p, t0.Add(20*time.Second))
		if !errors.Is(err, ErrDamaged) || n != 0 || c.Entries() != 0 {
			t.Fatalf("%s: LoadFile = %d, %v, %d entries", name, n, err, c.Entries())
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

// TestDecodeChecksEntries: a file whose checksum is right but whose entry
// does not hold together (written by a faulty saver) loads nothing.
func TestDecodeChecksEntries(t *testing.T) {
	t.Parallel()
	it := item{key: Key{Name: "x.example.", Type: dns.TypeA, Class: dns.ClassINET}, stored: t0.UnixNano(), life: 60,
		data: msg{name: "y.example.", qtype: dns.TypeA, an: []string{"y.example. 60 IN A 192.0.2.1"}}.pack(t)}
	b := append([]byte(fileMagic), 0, fileVersion, 0, 0)
	b = appendEntry(b, &it)
	b = append(b, 0, 0, 0, 1)
	b = append(b, 0, 0, 0, 0)
	crc := crcOf(b[:len(b)-4])
	copy(b[len(b)-4:], crc)
	if _, err := decodeFile(b); !errors.Is(err, ErrDamaged) {
		t.Fatalf("an answer to another name decoded: %v", err)
	}
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
