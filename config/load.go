package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/nxdnsd/nxdnsd/internal/safefile"
)

// MaxFileBytes bounds the configuration file, and a ca_file: 4 MiB, a
// hundred times a large hand-written configuration (or the system's whole
// CA bundle), little enough that reading it never strains a small board.
const MaxFileBytes = 4 << 20

// Load reads, decodes and validates the TOML configuration file at path.
//
// A relative upstreams[i].ca_file is taken relative to the directory of
// path, not the working directory (which is "/" under systemd), and is
// returned joined with it.
//
// Only a regular file of at most MaxFileBytes is read, after following
// symlinks (a ConfigMap mounts its files as symlinks): a FIFO, a device or
// a directory is refused at once, without blocking, with an error matching
// safefile.ErrNotRegular; a larger file with one matching
// safefile.ErrTooLarge.
//
// When the file cannot be read, the error wraps the os error. When its
// content is wrong, the error is Problems listing everything wrong with it.
// On success the configuration is normalised as Parse describes.
func Load(path string) (*Config, error) {
	data, err := safefile.ReadFile(path, MaxFileBytes)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return parse(data, filepath.Dir(path))
}

// Parse decodes and validates a TOML configuration. Keys absent from data
// take their defaults (Default, DefaultSlots, DefaultTTL; an upstream's
// name defaults to its address, redacted by wire.RedactAddress); keys
// present keep their values. A document without any [[upstreams]] takes
// the embedded default's (UpstreamsFromDefault); one whose upstreams are
// all disabled, or with an empty upstreams array, is refused.
//
// Any failure is returned as Problems, nil *Config with it: a syntax error
// is the one problem reported (nothing after it can be trusted); otherwise
// every unknown key, every value of the wrong type and every validation
// problem is listed.
//
// The returned configuration is normalised: forward_zones[i].zone,
// local_records[i].name and CNAME/PTR values are lower-case fully qualified
// names, local_records[i].type is upper-case, forward_zones[i].resolver is
// IP:PORT (port 53 when it was omitted) and log.level is lower-case. It
// carries what validation parsed beside the strings (see Validate).
func Parse(data []byte) (*Config, error) { return parse(data, "") }

// parse is Parse with relative ca_file paths resolved against dir ("" keeps
// them relative to the working directory).
func parse(data []byte, dir string) (*Config, error) {
	var doc map[string]any
	md, err := toml.Decode(string(data), &doc)
	if err != nil {
		return nil, Problems{syntaxProblem(err)}
	}
	cfg := Default()
	d := newDecoder(md.Keys())
	present := d.table(doc, reflect.ValueOf(&cfg).Elem(), "", "")
	if !present["upstreams"] {
		cfg.Upstreams, cfg.UpstreamsFromDefault = defaultUpstreams(), true
	}
	if dir != "" {
		cfg.Clients.resolveFiles(dir)
		cfg.Server.resolveTLSFiles(dir)
		for i := range cfg.Upstreams {
			if f := cfg.Upstreams[i].CAFile; f != "" && !filepath.IsAbs(f) {
				cfg.Upstreams[i].CAFile = filepath.Join(dir, f)
			}
		}
	}

	problems := d.problems
	for _, p := range cfg.check() {
		// A value that failed to decode kept its default; judging the
		// default would report a second, misleading problem at that path.
		if !under(p.Path, d.problems) {
			problems = append(problems, p)
		}
	}
	if len(problems) > 0 {
		return nil, problems
	}
	cfg.normalize()
	return &cfg, nil
}

// syntaxProblem turns a TOML parse error into the one problem reported,
// with its line when the library knows it.
func syntaxProblem(err error) Problem {
	var pe toml.ParseError
	if errors.As(err, &pe) && pe.Position.Line > 0 {
		return Problem{Message: oneLine(fmt.Sprintf("line %d: %s", pe.Position.Line, pe.Message))}
	}
	return Problem{Message: oneLine(strings.TrimPrefix(err.Error(), "toml: "))}
}

// under reports whether path is, or lies inside, the path of one of ps.
func under(path string, ps Problems) bool {
	for _, p := range ps {
		if path == p.Path || strings.HasPrefix(path, p.Path+".") || strings.HasPrefix(path, p.Path+"[") {
			return true
		}
	}
	return false
}
