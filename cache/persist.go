package cache

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/maphash"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/nxdnsd/nxdnsd/internal/safefile"
)

// The file SaveFile writes: a header (fileMagic, fileVersion as two
// bytes, two zero bytes), the entries, then a trailer: the number of
// entries (4 bytes) and the CRC-32C of everything before the CRC (4
// bytes). Numbers are big-endian. An entry is its key (name length, 2
// bytes; the name; type, class, 2 bytes each; flags, 1 byte: DO 1, CD 2),
// when it was stored (Unix nanoseconds, 8 bytes: wall-clock time, so that
// its age survives a restart), its lifetime in seconds (4 bytes), and its
// answer (length, 4 bytes; the bytes).
const (
	fileMagic   = "NXDC"
	fileVersion = 1
	fileHeader  = 8
	fileTrailer = 8
)

// ErrDamaged is what LoadFile reports, wrapped, for a file that is not one
// SaveFile wrote whole: another format or version, cut short, changed.
var ErrDamaged = errors.New("damaged cache file")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// SaveFile writes every answer the cache holds that is fresh or stale at
// now (not remembered failures) to path, atomically: to a temporary file in
// the same directory, synced, then renamed over path.
func (c *Cache) SaveFile(path string, now time.Time) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("saving cache: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
			err = fmt.Errorf("saving cache to %s: %w", path, err)
		}
	}()
	crc := crc32.New(castagnoli)
	bw := bufio.NewWriterSize(io.MultiWriter(f, crc), 64<<10)
	buf := append([]byte(fileMagic), 0, fileVersion, 0, 0)
	if _, err := bw.Write(buf); err != nil {
		return err
	}
	count := 0
	t := now.UnixNano()
	var items []item
	for i := range c.shards {
		s := &c.shards[i]
		// Copy under the lock, write after it: the items' bytes never
		// change, so they can be read unlocked.
		items = items[:0]
		s.mu.RLock()
		for _, sl := range s.items {
			if !sl.it.failure && sl.it.live(t, c.staleMaxAge) {
				items = append(items, sl.it)
			}
		}
		s.mu.RUnlock()
		for _, it := range items {
			buf = appendEntry(buf[:0], &it)
			if _, err := bw.Write(buf); err != nil {
				return err
			}
			count++
		}
	}
	buf = binary.BigEndian.AppendUint32(buf[:0], uint32(count))
	if _, err := bw.Write(buf); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if _, err := f.Write(binary.BigEndian.AppendUint32(buf[:0], crc.Sum32())); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	// The rename is durable once the directory is synced; a failure
	// there leaves the new file in place all the same.
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

func appendEntry(b []byte, it *item) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(it.key.Name)))
	b = append(b, it.key.Name...)
	b = binary.BigEndian.AppendUint16(b, it.key.Type)
	b = binary.BigEndian.AppendUint16(b, it.key.Class)
	var flags byte
	if it.key.DO {
		flags |= 1
	}
	if it.key.CD {
		flags |= 2
	}
	b = append(b, flags)
	b = binary.BigEndian.AppendUint64(b, uint64(it.stored))
	b = binary.BigEndian.AppendUint32(b, it.life)
	b = binary.BigEndian.AppendUint32(b, uint32(len(it.data)))
	return append(b, it.data...)
}

// Loaded is what LoadFile did with the entries of a file.
type Loaded struct {
	// Stored is how many it stored.
	Stored int
	// Skipped is how many it skipped as malformed: a length past what the
	// cache could hold, flags or a lifetime Put never writes, an answer
	// that is not a cacheable response to the entry's question.
	Skipped int
	// Dropped is how many well-formed entries it did not store: past
	// their stale window, their key already had an entry, or there was no
	// room left (it stores no more than Config.MaxBytes).
	Dropped int
}

// The bounds of what LoadFile reads.
const (
	// maxKeyName bounds an entry's name: the longest wire name (255
	// octets) in presentation format, every octet escaped as \DDD.
	maxKeyName = 4 * maxNameLen
	// maxAnswer bounds an entry's answer: the largest DNS message.
	maxAnswer = 1<<16 - 1
	// entryFixed is an entry's size less its name and its answer.
	entryFixed = 2 + 2 + 2 + 1 + 8 + 4 + 4
	// loadBuffer is how much of the file LoadFile reads at a time.
	loadBuffer = 64 << 10
)

// FileLimit is the largest file LoadFile reads: what a cache of twice
// Config.MaxBytes saves (an entry takes less room in the file than in
// memory), so that halving cache.size_mib keeps a warm restart, and 1 MiB
// for a small cache's file.
func (c *Cache) FileLimit() int64 {
	return 2*int64(c.budget)*int64(len(c.shards)) + 1<<20
}

// LoadFile reads back a file SaveFile wrote and stores its answers that
// are still fresh or stale at now, unless their key has an entry already,
// as long as they fit in Config.MaxBytes.
//
// It reads the file twice, each time in a buffer of its own size: first
// to check it whole (its version, its checksum, every length against what
// remains of the file), then to store its entries one by one, each
// admitted against the cache's bound before its answer is copied, so the
// memory it takes is what the cache holds and a few buffers. A malformed
// entry in a sound file is skipped (Loaded says how many).
//
// Only a regular file of at most FileLimit bytes is read, after following
// symlinks (see safefile). A missing file is an error matching
// fs.ErrNotExist; a damaged one matches ErrDamaged, and then nothing is
// stored.
func (c *Cache) LoadFile(path string, now time.Time) (Loaded, error) {
	f, size, err := safefile.Open(path, c.FileLimit())
	if err != nil {
		return Loaded{}, fmt.Errorf("loading cache: %w", err)
	}
	defer f.Close()
	ld, err := c.load(f, size, now)
	if err != nil {
		return ld, fmt.Errorf("loading cache from %s: %w", path, err)
	}
	return ld, nil
}

// load is LoadFile on r, a file of size bytes. Should the file change
// between its two reads (SaveFile replaces it whole, under another
// inode, so only another writer can), what the second stored before it
// saw the change stays.
func (c *Cache) load(r io.ReadSeeker, size int64, now time.Time) (Loaded, error) {
	sc := new(scanner)
	if err := sc.scan(r, size, nil); err != nil {
		return Loaded{}, err
	}
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return Loaded{}, err
	}
	var ld Loaded
	t := now.UnixNano()
	err := sc.scan(r, size, func(e *fileEntry) { c.loadEntry(e, t, &ld) })
	return ld, err
}

// loadEntry stores e, if it holds together, is live at now, and fits.
func (c *Cache) loadEntry(e *fileEntry, now int64, ld *Loaded) {
	if e.data == nil || e.flags > 3 || e.life == 0 || e.life > maxTTL {
		ld.Skipped++
		return
	}
	it := item{stored: e.stored, life: e.life}
	if !it.live(now, c.staleMaxAge) {
		ld.Dropped++
		return
	}
	s, ok := walk(e.data, 0, maxTTL)
	if !ok || s.optStart >= 0 ||
		binary.BigEndian.Uint16(e.data[s.qend-4:]) != e.typ ||
		binary.BigEndian.Uint16(e.data[s.qend-2:]) != e.class ||
		s.rcode != rcodeSuccess && s.rcode != rcodeNXDomain {
		ld.Skipped++
		return
	}
	k := Key{Type: e.typ, Class: e.class, DO: e.flags&1 != 0, CD: e.flags&2 != 0}
	h := c.mix(maphash.Bytes(c.seed, e.name), k)
	sh := c.shard(h)
	w := len(e.data) + len(e.name) + entryOverhead
	sh.mu.RLock()
	_, present := sh.index[h]
	room := sh.bytes+w <= c.budget
	sh.mu.RUnlock()
	if present || !room {
		ld.Dropped++
		return
	}
	// Admitted: only now is anything allocated for it.
	k.Name = string(e.name)
	if !nameIs(e.data[headerLen:s.qend-4], k.Name) {
		ld.Skipped++
		return
	}
	it.key = k
	it.data = append([]byte(nil), e.data...)
	it.qend = uint16(s.qend)
	it.rcode = uint16(s.rcode)
	sh.mu.Lock()
	if _, ok := sh.index[h]; !ok && sh.insertLocked(c, h, it, now) {
		ld.Stored++
	} else {
		ld.Dropped++
	}
	sh.mu.Unlock()
}

// fileEntry is an entry as the file has it; name and data lie in the
// scanner's buffers, valid until the next entry.
type fileEntry struct {
	name       []byte
	typ, class uint16
	flags      byte
	stored     int64
	life       uint32
	data       []byte // nil when longer than maxAnswer: not read
}

// scanner reads files with buffers of a fixed size, whatever the file
// says: it reads every length, checks it against what remains of the file
// and against its bound, and only then reads what it announces.
type scanner struct {
	br    *bufio.Reader
	fixed [entryFixed]byte
	name  [maxKeyName]byte
	data  [maxAnswer]byte
}

// scan reads a file of size bytes from r and checks it whole: its header,
// the framing of every entry, the trailer's count and checksum. It hands
// fn, unless nil, each entry as it reads it, before the checksum is
// checked at the end.
func (sc *scanner) scan(r io.Reader, size int64, fn func(*fileEntry)) error {
	if size < fileHeader+fileTrailer {
		return fmt.Errorf("%w: not a cache file", ErrDamaged)
	}
	crc := crc32.New(castagnoli)
	// Everything but the checksum goes through crc; the limit keeps the
	// buffer from reading the checksum ahead.
	src := io.TeeReader(io.LimitReader(r, size-4), crc)
	if sc.br == nil {
		sc.br = bufio.NewReaderSize(src, loadBuffer)
	} else {
		sc.br.Reset(src)
	}
	hdr := sc.fixed[:fileHeader]
	if err := sc.read(hdr); err != nil {
		return err
	}
	if string(hdr[:4]) != fileMagic {
		return fmt.Errorf("%w: not a cache file", ErrDamaged)
	}
	if v := binary.BigEndian.Uint16(hdr[4:]); v != fileVersion {
		return fmt.Errorf("%w: version %d, want %d", ErrDamaged, v, fileVersion)
	}
	left := size - fileHeader - fileTrailer // the entries' bytes not read yet
	var e fileEntry
	n := 0
	for ; left > 0; n++ {
		if left < entryFixed {
			return fmt.Errorf("%w: entry %d cut short", ErrDamaged, n)
		}
		f := sc.fixed[:2]
		if err := sc.read(f); err != nil {
			return err
		}
		nl := int64(binary.BigEndian.Uint16(f))
		left -= 2
		if nl > maxKeyName || nl > left-(entryFixed-2) {
			return fmt.Errorf("%w: entry %d: a name of %d bytes", ErrDamaged, n, nl)
		}
		e.name = sc.name[:nl]
		f = sc.fixed[:entryFixed-2]
		if err := sc.read(e.name); err != nil {
			return err
		}
		if err := sc.read(f); err != nil {
			return err
		}
		left -= nl + entryFixed - 2
		e.typ = binary.BigEndian.Uint16(f)
		e.class = binary.BigEndian.Uint16(f[2:])
		e.flags = f[4]
		e.stored = int64(binary.BigEndian.Uint64(f[5:]))
		e.life = binary.BigEndian.Uint32(f[13:])
		dl := int64(binary.BigEndian.Uint32(f[17:]))
		if dl > left {
			return fmt.Errorf("%w: entry %d: an answer of %d bytes, %d left in the file", ErrDamaged, n, dl, left)
		}
		left -= dl
		if dl > maxAnswer {
			e.data = nil
			if err := sc.discard(dl); err != nil {
				return err
			}
		} else {
			e.data = sc.data[:dl]
			if err := sc.read(e.data); err != nil {
				return err
			}
		}
		if fn != nil {
			fn(&e)
		}
	}
	f := sc.fixed[:4]
	if err := sc.read(f); err != nil {
		return err
	}
	if count := binary.BigEndian.Uint32(f); int64(count) != int64(n) {
		return fmt.Errorf("%w: %d entries, trailer says %d", ErrDamaged, n, count)
	}
	// The buffer has read all size-4 bytes: the checksum is next in r.
	sum := sc.fixed[4:8]
	if _, err := io.ReadFull(r, sum); err != nil {
		return readError(err)
	}
	if crc.Sum32() != binary.BigEndian.Uint32(sum) {
		return fmt.Errorf("%w: checksum mismatch", ErrDamaged)
	}
	return nil
}

func (sc *scanner) read(b []byte) error {
	_, err := io.ReadFull(sc.br, b)
	return readError(err)
}

// discard skips n bytes, n perhaps past what an int holds on 32 bits.
func (sc *scanner) discard(n int64) error {
	for n > 0 {
		k, err := sc.br.Discard(int(min(n, 1<<30)))
		if err != nil {
			return readError(err)
		}
		n -= int64(k)
	}
	return nil
}

// readError is err, a read's, with a file shorter than its size said
// (it shrank since it was opened) reported as damage.
func readError(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: cut short", ErrDamaged)
	}
	return err
}
