// Package dnsmsg reads and writes DNS message bytes without a socket: the
// header's fields, question and record walking, the layout of an
// upstream's answer, the replies nxdnsd builds from a query's bytes alone.
// The listeners (wire/server), the transports (wire/transport) and the
// cache import it; it imports none of them.
package dnsmsg
