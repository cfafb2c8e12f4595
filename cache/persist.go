package cache

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"time"
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

// LoadFile reads back a file SaveFile wrote and stores its answers that
// are still fresh or stale at now, unless their key has an entry already,
// and returns how many it stored. A missing file is an error matching
// fs.ErrNotExist; a damaged one matches ErrDamaged, and then nothing is
// stored: every entry is checked before the first is.
func (c *Cache) LoadFile(path string, now time.Time) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("loading cache: %w", err)
	}
	items, err := decodeFile(b)
	if err != nil {
		return 0, fmt.Errorf("loading cache from %s: %w", path, err)
	}
	t := now.UnixNano()
	n := 0
	for _, it := range items {
		if !it.live(t, c.staleMaxAge) {
			continue
		}
		h := c.hash(it.key)
		s := c.shard(h)
		s.mu.Lock()
		if _, ok := s.index[h]; !ok && s.insertLocked(c, h, it, t) {
			n++
		}
		s.mu.Unlock()
	}
	return n, nil
}

// decodeFile checks b, a whole file, and returns its entries.
func decodeFile(b []byte) ([]item, error) {
	if len(b) < fileHeader+fileTrailer || string(b[:4]) != fileMagic {
		return nil, fmt.Errorf("%w: not a cache file", ErrDamaged)
	}
	if v := binary.BigEndian.Uint16(b[4:]); v != fileVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrDamaged, v, fileVersion)
	}
	body := len(b) - 4
	if crc32.Checksum(b[:body], castagnoli) != binary.BigEndian.Uint32(b[body:]) {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrDamaged)
	}
	count := int(binary.BigEndian.Uint32(b[body-4:]))
	r := reader{b: b[fileHeader : body-4]}
	items := make([]item, 0, min(count, len(r.b)/headerLen))
	for len(r.b) > 0 {
		it, ok := r.entry()
		if !ok {
			return nil, fmt.Errorf("%w: entry %d malformed", ErrDamaged, len(items))
		}
		items = append(items, it)
	}
	if len(items) != count {
		return nil, fmt.Errorf("%w: %d entries, trailer says %d", ErrDamaged, len(items), count)
	}
	return items, nil
}

// reader reads an entry's fields off b; ok turns false for good at the
// first that does not fit.
type reader struct {
	b  []byte
	ok bool
}

func (r *reader) next(n int) []byte {
	if !r.ok || n > len(r.b) {
		r.ok = false
		return make([]byte, n)
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *reader) u16() uint16 { return binary.BigEndian.Uint16(r.next(2)) }
func (r *reader) u32() uint32 { return binary.BigEndian.Uint32(r.next(4)) }
func (r *reader) u64() uint64 { return binary.BigEndian.Uint64(r.next(8)) }

// entry reads one entry and checks its answer as Put would have stored
// it: a response to the key's question, records that fill it, no OPT.
func (r *reader) entry() (item, bool) {
	r.ok = true
	var it item
	it.key.Name = string(r.next(int(r.u16())))
	it.key.Type = r.u16()
	it.key.Class = r.u16()
	flags := r.next(1)[0]
	it.key.DO, it.key.CD = flags&1 != 0, flags&2 != 0
	it.stored = int64(r.u64())
	it.life = r.u32()
	data := r.next(int(r.u32()))
	if !r.ok || flags > 3 || it.life == 0 || it.life > maxTTL {
		return it, false
	}
	s, ok := walk(data, 0, maxTTL)
	if !ok || s.optStart >= 0 ||
		binary.BigEndian.Uint16(data[s.qend-4:]) != it.key.Type ||
		binary.BigEndian.Uint16(data[s.qend-2:]) != it.key.Class ||
		!nameIs(data[headerLen:s.qend-4], it.key.Name) ||
		s.rcode != rcodeSuccess && s.rcode != rcodeNXDomain {
		return it, false
	}
	it.data = append([]byte(nil), data...)
	it.qend = uint16(s.qend)
	it.rcode = uint16(s.rcode)
	return it, true
}
