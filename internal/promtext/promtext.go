// Package promtext writes the parts of Prometheus's text exposition
// format that nxdnsd's hand-written metric families share: a family's
// HELP and TYPE lines, and label values escaped. The metrics package and
// the blocking package (its per-list families) write their samples with
// it, beside the families VictoriaMetrics/metrics writes.
package promtext

import "strings"

// AppendHelp appends family's HELP line with help, which holds no
// backslash or newline to escape, and its TYPE line with kind ("counter",
// "gauge").
func AppendHelp(b []byte, family, help, kind string) []byte {
	b = append(b, "# HELP "...)
	b = append(b, family...)
	b = append(b, ' ')
	b = append(b, help...)
	b = append(b, "\n# TYPE "...)
	b = append(b, family...)
	b = append(b, ' ')
	b = append(b, kind...)
	return append(b, '\n')
}

// labelEscaper escapes a label value as the text format requires.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// Escape is v escaped for a label value: backslash, double quote and
// newline.
func Escape(v string) string { return labelEscaper.Replace(v) }
