// Package rule parses the lines of a block or allow list (spec section 11)
// into rules: hosts lines, plain domains, Adblock `||x^` and `@@||x^`,
// wildcards `*.x` and RE2 regular expressions `/re/`. A line that is none
// of these is skipped and counted by the caller, never guessed at.
//
// It is the one parser of rules: list bodies, the custom rules of the
// configuration (validated by package config) and those added through the
// API all go through Parse. It depends on nothing of nxdnsd's, so that
// config can import it.
package rule

import (
	"bytes"
	"net/netip"
	"regexp"
)

// Kind is what a rule matches, relative to its name.
type Kind uint8

const (
	// Exact matches the name itself: hosts lines and plain domains.
	Exact Kind = iota + 1
	// Suffix matches the name and every name below it: `||x^`.
	Suffix
	// Below matches every name strictly below the name: `*.x`.
	Below
	// Regexp matches names (without the final dot) the expression matches.
	Regexp
)

// Limits on what a line may hold.
const (
	// MaxNameLen is the longest name in presentation form without its
	// final dot (RFC 1035: 255 octets on the wire).
	MaxNameLen = 253
	// MaxLabelLen is the longest label (RFC 1035).
	MaxLabelLen = 63
	// MaxRegexpLen bounds a regular expression's source. RE2 runs in time
	// linear in the name, but a huge expression costs memory and compile
	// time; real lists' expressions are well under 200 bytes.
	MaxRegexpLen = 1024
)

// Rule is one rule of a line. Name and Source alias the line's bytes: they
// are valid only during the callback of Parse.
type Rule struct {
	Kind  Kind
	Allow bool   // an allow rule (`@@||x^`, or any line of an allow list)
	Name  []byte // lower-case, no final dot; empty for Regexp
	// Source is the expression between the slashes, for Regexp.
	Source []byte
}

// Parse parses one line (without its line break) and calls emit for each
// rule it holds: several for a hosts line naming several names. allowList
// makes every rule an allow rule, as in an allow list. It returns the
// number of rules emitted; 0 means the line is skipped: blank, a comment,
// or none of the formats (comment reports which: a blank or comment line
// is not counted as skipped by lists).
//
// Parse does not compile regular expressions (see Compile) and does not
// allocate, but for a line whose first word is an IPv6 address other
// than :: and ::1, or hex digits and colons (netip's string and error).
func Parse(line []byte, allowList bool, emit func(Rule)) (n int, comment bool) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] == '#' || line[0] == '!' {
		return 0, true
	}
	switch {
	case line[0] == '/':
		if len(line) < 3 || line[len(line)-1] != '/' || len(line)-2 > MaxRegexpLen {
			return 0, false
		}
		emit(Rule{Kind: Regexp, Allow: allowList, Source: line[1 : len(line)-1]})
		return 1, false
	case bytes.HasPrefix(line, []byte("@@||")):
		name, ok := adblock(line[4:])
		if !ok {
			return 0, false
		}
		emit(Rule{Kind: Suffix, Allow: true, Name: name})
		return 1, false
	case bytes.HasPrefix(line, []byte("||")):
		name, ok := adblock(line[2:])
		if !ok {
			return 0, false
		}
		emit(Rule{Kind: Suffix, Allow: allowList, Name: name})
		return 1, false
	case bytes.HasPrefix(line, []byte("*.")):
		name := stripComment(line[2:])
		if !validName(name) {
			return 0, false
		}
		emit(Rule{Kind: Below, Allow: allowList, Name: lower(name)})
		return 1, false
	}
	first, rest := field(line)
	if isAddr(first) {
		// A hosts line: an address, then one or more names, then perhaps
		// a comment. Every name must be valid, or the line is skipped
		// whole: a half-understood line is a guess.
		var names [16][]byte
		k := 0
		for rest = bytes.TrimSpace(rest); len(rest) > 0 && rest[0] != '#'; rest = bytes.TrimSpace(rest) {
			var name []byte
			name, rest = field(rest)
			name = bytes.TrimSuffix(name, []byte("."))
			if !validName(name) || k == len(names) {
				return 0, false
			}
			names[k] = name
			k++
		}
		for _, name := range names[:k] {
			emit(Rule{Kind: Exact, Allow: allowList, Name: lower(name)})
		}
		return k, false
	}
	name := stripComment(line)
	name = bytes.TrimSuffix(name, []byte("."))
	if !validName(name) {
		return 0, false
	}
	emit(Rule{Kind: Exact, Allow: allowList, Name: lower(name)})
	return 1, false
}

// isAddr reports whether s is an IP address, the first field of a hosts
// line. netip's error for a word that is not an address allocates, on
// every such line (a plain domain of hex letters with a comment: `cafe.de
// # …`), so IPv4 is parsed here, as strictly as netip does, and only a
// word with a colon, of hex digits, dots, colons and '%', is given to
// netip.
func isAddr(s []byte) bool {
	switch string(s) {
	case "0.0.0.0", "127.0.0.1", "::", "::1":
		return true
	}
	colon := false
	for _, c := range s {
		switch {
		case c == ':':
			colon = true
		case c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' || c == '.' || c == '%':
		default:
			return false
		}
	}
	if !colon {
		return isIPv4(s)
	}
	_, err := netip.ParseAddr(string(s))
	return err == nil
}

// isIPv4 reports whether s is a dotted-quad IPv4 address as netip reads
// one: four decimal fields of at most 255, without leading zeros.
func isIPv4(s []byte) bool {
	fields, val, digits := 0, 0, 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '.' {
			if digits == 0 {
				return false
			}
			fields++
			val, digits = 0, 0
			continue
		}
		c := s[i]
		if c < '0' || c > '9' || digits > 0 && val == 0 {
			return false // not a digit, or after a leading zero
		}
		val = val*10 + int(c-'0')
		digits++
		if val > 255 {
			return false
		}
	}
	return fields == 4
}

// adblock reads `name^` (the `||` already cut off): nothing may follow the
// separator but a comment-free end of line, so `$third-party`, paths and
// element rules are refused.
func adblock(s []byte) ([]byte, bool) {
	s = bytes.TrimSpace(s)
	name, ok := bytes.CutSuffix(s, []byte("^"))
	if !ok || !validName(name) {
		return nil, false
	}
	return lower(name), true
}

// stripComment cuts a trailing " # comment" off a plain-domain or wildcard
// line, and the space before it.
func stripComment(s []byte) []byte {
	if i := bytes.IndexByte(s, '#'); i > 0 && (s[i-1] == ' ' || s[i-1] == '\t') {
		s = s[:i]
	}
	return bytes.TrimSpace(s)
}

// field splits s at its first run of spaces or tabs.
func field(s []byte) (first, rest []byte) {
	i := bytes.IndexAny(s, " \t")
	if i < 0 {
		return s, nil
	}
	return s[:i], s[i:]
}

// validName reports whether s is a host name in presentation form without
// its final dot: labels of letters, digits, '-' and '_' (lists name
// service records and some trackers use it), none empty, none over 63
// bytes, at most 253 bytes in all, and not an IP address (hosts files list
// `0.0.0.0 0.0.0.0`). Non-ASCII bytes are refused: an internationalised
// name is written as its A-labels (`xn--…`), the form a query carries.
func validName(s []byte) bool {
	if len(s) == 0 || len(s) > MaxNameLen {
		return false
	}
	label, digitsAndDots := 0, true
	for _, c := range s {
		switch {
		case c == '.':
			if label == 0 {
				return false
			}
			label = 0
			continue
		case c >= '0' && c <= '9':
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '-', c == '_':
			digitsAndDots = false
		default:
			return false // ':' of an IPv6 address, '/', '*', '$', '^', non-ASCII...
		}
		label++
		if label > MaxLabelLen {
			return false
		}
	}
	return label > 0 && !digitsAndDots
}

// lower lower-cases s in place: the line is the caller's buffer, read once.
func lower(s []byte) []byte {
	for i, c := range s {
		if c >= 'A' && c <= 'Z' {
			s[i] = c + 'a' - 'A'
		}
	}
	return s
}

// Compile compiles a Regexp rule's source, case-insensitively (names match
// case-insensitively, spec section 11).
func Compile(source []byte) (*regexp.Regexp, error) {
	return regexp.Compile("(?i)" + string(source))
}

// Text renders a rule the way a list would write it: the text /api/rules
// and /api/blocking/check show.
func (r Rule) Text() string {
	var prefix, suffix string
	switch r.Kind {
	case Suffix:
		prefix, suffix = "||", "^"
		if r.Allow {
			prefix = "@@||"
		}
	case Below:
		prefix = "*."
	case Regexp:
		return "/" + string(r.Source) + "/"
	}
	return prefix + string(r.Name) + suffix
}

// One parses s as exactly one rule, for a custom rule of the
// configuration or the API. allow makes it an allow rule. It returns
// false when s holds no rule or several (a hosts line of two names is two
// custom rules), or a regular expression that does not compile.
func One(s string, allow bool) (Rule, bool) {
	var out Rule
	buf := []byte(s)
	n, _ := Parse(buf, allow, func(r Rule) {
		out = r
		out.Name = bytes.Clone(r.Name)
		out.Source = bytes.Clone(r.Source)
	})
	if n != 1 {
		return Rule{}, false
	}
	if out.Kind == Regexp {
		if _, err := Compile(out.Source); err != nil {
			return Rule{}, false
		}
	}
	return out, true
}
