package blocking

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// What state_dir holds (spec section 11): the last good copy of each URL
// list, named by its source (a changed source never loads the old
// source's copy), with its metadata beside it, and the rules added
// through the API:
//
//	state_dir/lists/<sha256(source)[:16]>.txt   the body as fetched (decompressed)
//	state_dir/lists/<sha256(source)[:16]>.json  copyMeta
//	state_dir/rules.json                        the API's rules
//
// Every file is written to a temporary name and renamed into place, so a
// crash leaves the previous copy whole.

// copyMeta is a copy's metadata: what the conditional GET sends, and when
// the copy was fetched.
type copyMeta struct {
	Source       string    `json:"source"`
	ETag         string    `json:"etag,omitempty"`
	LastModified string    `json:"last_modified,omitempty"`
	UpdatedAt    time.Time `json:"updated_at"`
}

func listsDir(stateDir string) string { return filepath.Join(stateDir, "lists") }

func copyBase(stateDir, source string) string {
	sum := sha256.Sum256([]byte(source))
	return filepath.Join(listsDir(stateDir), hex.EncodeToString(sum[:8]))
}

func copyPath(stateDir, source string) string { return copyBase(stateDir, source) + ".txt" }
func metaPath(stateDir, source string) string { return copyBase(stateDir, source) + ".json" }

// createTemp creates a temporary file for a copy being downloaded.
func createTemp(stateDir string) (*os.File, string, error) {
	dir := listsDir(stateDir)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, "", err
	}
	f, err := os.CreateTemp(dir, ".fetch-*")
	if err != nil {
		return nil, "", err
	}
	return f, f.Name(), nil
}

func readMeta(stateDir, source string) (copyMeta, error) {
	var meta copyMeta
	b, err := os.ReadFile(metaPath(stateDir, source))
	if err != nil {
		return meta, err
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		return meta, err
	}
	if meta.Source != source {
		return meta, errors.New("the copy's metadata names another source")
	}
	return meta, nil
}

func writeMeta(stateDir string, meta copyMeta) error {
	b, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	return writeFileAtomic(metaPath(stateDir, meta.Source), b)
}

// writeFileAtomic writes b to path through a temporary file and a rename.
func writeFileAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".write-*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}

// redactSource drops a URL's user info and query, which often hold a
// token, from what the API, the log and metrics show.
func redactSource(s string) string {
	if !strings.HasPrefix(s, "http://") && !strings.HasPrefix(s, "https://") {
		return s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment = nil, "", false, ""
	return u.String()
}

// redactErr is err with the URL's secrets left out: net/http quotes the
// whole URL in its errors.
func redactErr(err error, rawURL string) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return &url.Error{Op: ue.Op, URL: redactSource(ue.URL), Err: ue.Err}
	}
	if r := redactSource(rawURL); r != rawURL {
		return errors.New(strings.ReplaceAll(err.Error(), rawURL, r))
	}
	return err
}
