package config

import "strings"

// Problem is one thing wrong with a configuration, named by where it is.
type Problem struct {
	// Path is the TOML path of the offending key or table, array elements
	// zero-based: "upstreams", "upstreams[3].address",
	// "upstream.total_timeout_ms". It is empty only when the document has
	// no usable structure at all (a TOML syntax error).
	Path    string
	Message string
}

// String renders the problem as the line `nxdnsd -check` prints:
// "config: PATH: message".
func (p Problem) String() string {
	if p.Path == "" {
		return "config: " + p.Message
	}
	return "config: " + p.Path + ": " + p.Message
}

// Problems is every problem found in one configuration, in the order of the
// file's sections. Load, Parse and Validate return it as their error, never
// empty; callers reach the list with errors.As.
type Problems []Problem

// Error is one line per problem, each as Problem.String renders it, so
// printing the error is exactly the `-check` report.
func (ps Problems) Error() string {
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// oneLine escapes the line breaks of a problem's message, so that it stays
// the one line `nxdnsd -check` prints for it. Messages quote the user's own
// bytes: a TOML syntax error shows the offending text, an os error the
// ca_file path as written.
func oneLine(msg string) string {
	if !strings.ContainsAny(msg, "\r\n") {
		return msg
	}
	return strings.NewReplacer("\r", `\r`, "\n", `\n`).Replace(msg)
}
