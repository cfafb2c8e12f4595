package config

import (
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// decoder maps a parsed TOML document onto a Config, guided by the struct
// tags, instead of using toml.Decode's struct mapping, because that mapping
// cannot keep the contract:
//   - it matches keys case-insensitively, so a "Listen" typo would silently
//     work where the contract says unknown keys are errors;
//   - MetaData.Undecoded names a stray key in an array of tables without its
//     index ("upstreams.adress", never "upstreams[1].adress"), and
//     IsDefined cannot tell which element defined a key, which per-element
//     defaults (slots, ttl, name) need;
//   - it stops at the first type mismatch, and it stores a TOML integer in
//     a Go int without a range check, which wraps on 32-bit boards.
//
// Every key is decoded onto a value already holding its default, so an
// absent key keeps the default and a present one replaces it.
type decoder struct {
	order    map[string]int // dotted key, indexes dropped -> first position in the file
	problems Problems
}

// newDecoder remembers where each key first appears so that problems are
// reported in file order; keys is toml.MetaData.Keys().
func newDecoder(keys []toml.Key) *decoder {
	d := &decoder{order: make(map[string]int, len(keys))}
	for i, k := range keys {
		s := strings.Join(k, ".")
		if _, ok := d.order[s]; !ok {
			d.order[s] = i
		}
	}
	return d
}

func (d *decoder) add(path, format string, args ...any) {
	d.problems = append(d.problems, Problem{Path: path, Message: oneLine(fmt.Sprintf(format, args...))})
}

// table decodes the TOML table m onto the struct dst. path is m's rendered
// TOML path ("upstreams[1]"), key the same without indexes ("upstreams").
// It returns the keys m holds, so that callers can derive defaults from
// other keys.
func (d *decoder) table(m map[string]any, dst reflect.Value, path, key string) map[string]bool {
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		oi, oj := d.order[join(key, names[i])], d.order[join(key, names[j])]
		if oi != oj {
			return oi < oj
		}
		return names[i] < names[j]
	})
	present := make(map[string]bool, len(m))
	for _, name := range names {
		present[name] = true
		p := join(path, quoteKey(name))
		i, near := fieldIndex(dst.Type(), name)
		if i < 0 {
			if near != "" {
				d.add(p, "unknown key (keys are case-sensitive: did you mean %q?)", near)
			} else {
				d.add(p, "unknown key")
			}
			continue
		}
		d.value(m[name], dst.Field(i), p, join(key, name))
	}
	return present
}

// value decodes one TOML value onto dst, reporting a type mismatch at path.
// It reports whether dst was set.
func (d *decoder) value(v any, dst reflect.Value, path, key string) bool {
	switch dst.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return d.mismatch(path, "a table", v)
		}
		d.table(m, dst, path, key)
	case reflect.Slice:
		if dst.Type().Elem().Kind() == reflect.Struct {
			return d.tables(v, dst, path, key)
		}
		arr, ok := v.([]any)
		if !ok {
			return d.mismatch(path, "an array", v)
		}
		out := reflect.MakeSlice(dst.Type(), len(arr), len(arr))
		ok = true
		for i, e := range arr {
			ok = d.value(e, out.Index(i), fmt.Sprintf("%s[%d]", path, i), key) && ok
		}
		if ok {
			dst.Set(out)
		}
		return ok
	case reflect.Pointer:
		p := reflect.New(dst.Type().Elem())
		if !d.value(v, p.Elem(), path, key) {
			return false
		}
		dst.Set(p)
	case reflect.String:
		s, ok := v.(string)
		if !ok {
			return d.mismatch(path, "a string", v)
		}
		dst.SetString(s)
	case reflect.Bool:
		b, ok := v.(bool)
		if !ok {
			return d.mismatch(path, "a boolean", v)
		}
		dst.SetBool(b)
	case reflect.Int:
		n, ok := v.(int64)
		if !ok {
			return d.mismatch(path, "an integer", v)
		}
		if dst.OverflowInt(n) {
			d.add(path, "integer %d out of range", n)
			return false
		}
		dst.SetInt(n)
	default:
		// Config holds only the kinds above; a new kind is a change to
		// this file, caught by the tests that decode every key.
		panic(fmt.Sprintf("config: field kind %s has no decoder", dst.Kind()))
	}
	return true
}

// tables decodes an array of tables, written as [[name]] sections or as an
// inline array of inline tables, each element onto its defaults.
func (d *decoder) tables(v any, dst reflect.Value, path, key string) bool {
	var elems []any
	switch arr := v.(type) {
	case []map[string]any:
		for _, m := range arr {
			elems = append(elems, m)
		}
	case []any:
		elems = arr
	default:
		return d.mismatch(path, "an array of tables", v)
	}
	out := reflect.MakeSlice(dst.Type(), len(elems), len(elems))
	for i, elem := range elems {
		e := out.Index(i)
		e.Set(newElement(e.Type()))
		p := fmt.Sprintf("%s[%d]", path, i)
		m, ok := elem.(map[string]any)
		if !ok {
			// The element stays at its defaults, holding its index, so
			// that the elements after it keep their paths.
			d.mismatch(p, "a table", elem)
			continue
		}
		finishElement(e, d.table(m, e, p, key))
	}
	dst.Set(out)
	return true
}

// newElement is an array-of-tables element holding its defaults.
func newElement(t reflect.Type) reflect.Value {
	switch t {
	case reflect.TypeFor[Upstream]():
		return reflect.ValueOf(newUpstream())
	case reflect.TypeFor[LocalRecord]():
		return reflect.ValueOf(newLocalRecord())
	case reflect.TypeFor[BlockingList]():
		return reflect.ValueOf(newBlockingList())
	}
	return reflect.Zero(t)
}

// finishElement applies the defaults that depend on other keys.
func finishElement(e reflect.Value, present map[string]bool) {
	if u, ok := e.Addr().Interface().(*Upstream); ok && !present["name"] {
		// Redacted: the name is in metrics, logs and /api/health, and a
		// DoH path is often an account's secret.
		u.Name = transport.RedactAddress(u.Address)
	}
}

func (d *decoder) mismatch(path, want string, got any) bool {
	d.add(path, "expected %s, found %s", want, describe(got))
	return false
}

// describe names a decoded TOML value's type the way the TOML spec does.
func describe(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case time.Time:
		return "a date-time"
	case []any, []map[string]any:
		return "an array"
	case map[string]any:
		return "a table"
	}
	return fmt.Sprintf("a %T", v)
}

// fieldIndex finds the field of struct type t whose toml tag is exactly
// name. When there is none, near is a tag equal to name but for case.
// Fields without a tag or tagged "-" hold parsed values, not keys: no key
// reaches them, not even one spelled "-" or "".
func fieldIndex(t reflect.Type, name string) (index int, near string) {
	for i := range t.NumField() {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ",")
		if tag == "" || tag == "-" {
			continue
		}
		if tag == name {
			return i, ""
		}
		if strings.EqualFold(tag, name) {
			near = tag
		}
	}
	return -1, near
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

var bareKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// quoteKey renders a key as TOML would need it written, so a path naming
// a stray `"foo bar"` key stays unambiguous.
func quoteKey(k string) string {
	if bareKey.MatchString(k) {
		return k
	}
	return strconv.Quote(k)
}
