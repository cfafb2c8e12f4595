package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// File is one regular file of an archive or an image layer.
type File struct {
	Name string // slash-separated, relative: "usr/bin/nxdnsd"
	Mode int64  // permission bits: 0o755, 0o644
	Data []byte
}

// Tar writes files as an uncompressed tar stream: the folders they need
// first (0755), then every entry sorted by name, owned by root (0:0), with
// the time mtime. The same files give the same bytes.
func Tar(w io.Writer, files []File, mtime time.Time) error {
	mtime = mtime.UTC().Truncate(time.Second)
	byName := map[string]File{}
	dirs := map[string]bool{}
	for _, f := range files {
		name := path.Clean(f.Name)
		if name == "." || strings.HasPrefix(name, "/") || strings.HasPrefix(name, "../") {
			return fmt.Errorf("archive: bad file name %q", f.Name)
		}
		if _, dup := byName[name]; dup {
			return fmt.Errorf("archive: %q twice", name)
		}
		byName[name] = f
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	type entry struct {
		name string
		dir  bool
	}
	var entries []entry
	for d := range dirs {
		if _, clash := byName[d]; clash {
			return fmt.Errorf("archive: %q is a file and a folder", d)
		}
		entries = append(entries, entry{d, true})
	}
	for n := range byName {
		entries = append(entries, entry{n, false})
	}
	// Sorted by name, a folder comes before what it holds.
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.name, b.name) })

	tw := tar.NewWriter(w)
	for _, e := range entries {
		h := &tar.Header{
			Uid: 0, Gid: 0, Uname: "root", Gname: "root",
			ModTime: mtime,
			Format:  tar.FormatPAX,
		}
		if e.dir {
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, e.name+"/", 0o755
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			continue
		}
		f := byName[e.name]
		h.Typeflag, h.Name, h.Mode, h.Size = tar.TypeReg, e.name, f.Mode, int64(len(f.Data))
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// Gzip compresses b at the best compression, with no name and no time in
// the gzip header.
func Gzip(b []byte) ([]byte, error) {
	var out bytes.Buffer
	zw, err := gzip.NewWriterLevel(&out, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// TarGz is Tar, compressed with Gzip.
func TarGz(files []File, mtime time.Time) ([]byte, error) {
	var raw bytes.Buffer
	if err := Tar(&raw, files, mtime); err != nil {
		return nil, err
	}
	return Gzip(raw.Bytes())
}

// WriteSums writes dir/SHA256SUMS for every regular file in dir but itself,
// sorted by name, in the format sha256sum -c reads.
func WriteSums(dir string) ([]byte, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	for _, de := range des { // ReadDir sorts by name
		if !de.Type().IsRegular() || de.Name() == "SHA256SUMS" {
			continue
		}
		f, err := os.Open(filepath.Join(dir, de.Name()))
		if err != nil {
			return nil, err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(h.Sum(nil)), de.Name())
	}
	sums := []byte(b.String())
	return sums, os.WriteFile(filepath.Join(dir, "SHA256SUMS"), sums, 0o644)
}
