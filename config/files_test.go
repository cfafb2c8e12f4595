package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nxdnsd/nxdnsd/internal/safefile"
)

// loadBounded is Load(path), failing the test if it has not returned
// after a bound that only a blocked read reaches; unblock releases such a
// read so that nothing outlives the test.
func loadBounded(t *testing.T, path string, unblock func()) (*Config, error) {
	t.Helper()
	type result struct {
		cfg *Config
		err error
	}
	done := make(chan result, 1)
	go func() {
		cfg, err := Load(path)
		done <- result{cfg, err}
	}()
	select {
	case r := <-done:
		return r.cfg, r.err
	case <-time.After(10 * time.Second): // a bound for a blocked read, not a timing assertion
		unblock()
		<-done
		t.Fatalf("Load(%s) blocked", path)
		return nil, nil
	}
}

// The -c file must be a regular file, symlinks followed, of at most
// MaxFileBytes: a FIFO (here with a writer, so that an open without
// O_NONBLOCK would succeed and its read block for ever), a symlink to a
// device (/dev/null: reading it would have given an empty file; /dev/zero
// is cmd/nxdnsd's test, in a process of bounded memory) and a file past
// the bound are refused at once, saying what they are. Before safefile,
// the FIFO blocked, /dev/null read as an empty configuration and the big
// file was read whole.
func TestLoadRefusesWhatIsNotARegularFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.toml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	hold, err := os.OpenFile(fifo, os.O_RDWR, 0) // a reader and a writer: opens never block
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	null := filepath.Join(dir, "null.toml")
	if err := os.Symlink("/dev/null", null); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.toml")
	if err := os.WriteFile(big, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, MaxFileBytes+1); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		want error
		says string
	}{
		{fifo, safefile.ErrNotRegular, "a FIFO"},
		{null, safefile.ErrNotRegular, "symlinks to /dev/null, a character device"},
		{dir, safefile.ErrNotRegular, "a directory"},
		{big, safefile.ErrTooLarge, "4194305 bytes"},
	} {
		cfg, err := loadBounded(t, c.path, func() { hold.Close() })
		if cfg != nil || !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("Load(%s) = %v, %v; want %v saying %q", c.path, cfg, err, c.want, c.says)
		}
	}
}

// A configuration mounted as a ConfigMap mounts it: a symlink to a symlink
// to the file. It loads, and its relative ca_file is taken beside the
// symlink (the directory named), as for any file.
func TestLoadFollowsSymlinks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := filepath.Join(dir, "..2026_12_01_00_00_00.1")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "nxdns.toml"), []byte(okUpstream), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Base(data), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "nxdns.toml")
	if err := os.Symlink("..data/nxdns.toml", p); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err != nil {
		t.Fatal(err)
	}
}

// A ca_file follows the same rule: a FIFO is a problem at its path, at
// once.
func TestCAFileMustBeARegularFile(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "ca.pem")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	hold, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	p := filepath.Join(t.TempDir(), "nxdns.toml")
	src := "[[upstreams]]\naddress = \"tls://dns.example:853\"\nca_file = " + quote(fifo) + "\n"
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = loadBounded(t, p, func() { hold.Close() })
	ps := problemsOf(t, err)
	if len(ps) != 1 || ps[0].Path != "upstreams[0].ca_file" || !strings.Contains(ps[0].Message, "a FIFO") {
		t.Errorf("problems %v, want one at upstreams[0].ca_file saying it is a FIFO", ps)
	}
}

// cache.path that exists must be a regular file, after following
// symlinks: a FIFO or a device there is a problem at cache.path (before,
// -check passed and start-up read it until out of memory, or for ever). A
// symlink to a regular file, and a file not there yet, are fine.
func TestCachePathMustBeARegularFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	regular := filepath.Join(dir, "regular")
	if err := os.WriteFile(regular, []byte("NXDC"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(regular, link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, says string
	}{
		{fifo, "is a FIFO"},
		{zero, "leads through symlinks to /dev/zero, a character device"},
		{dir, "is a directory"},
		{regular, ""},
		{link, ""},
		{filepath.Join(dir, "new"), ""},
	} {
		_, err := Parse([]byte("[cache]\npath = " + quote(c.path) + okUpstream))
		if c.says == "" {
			if err != nil {
				t.Errorf("%s: %v", c.path, err)
			}
			continue
		}
		ps := problemsOf(t, err)
		if len(ps) != 1 || ps[0].Path != "cache.path" || !strings.Contains(ps[0].Message, c.says) {
			t.Errorf("%s: problems %v, want one at cache.path saying %q", c.path, ps, c.says)
		}
	}
}
