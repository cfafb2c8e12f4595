package main

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"

	"github.com/nxdnsd/nxdnsd/cmd/nxdnsbench/fake"
	"github.com/nxdnsd/nxdnsd/internal/testca"
)

// The encrypted rows (issue 31): nxdnsd's DoT and DoH listeners beside
// dnsdist's addTLSLocal and addDOHLocal, on the same certificate, caches
// on (nxdnsd's answer cache, dnsdist's packet cache), so that what is
// measured is the listener: dnsperf -m dot and -m doh with the hits rows'
// query file and encClients persistent connections.

// encClients is dnsperf's -c for the encrypted rows: the issue's 100
// persistent client connections.
const encClients = 100

// encListen are the encrypted listeners of one forwarder under test.
type encListen struct {
	DoT, DoH          netip.AddrPort
	CertFile, KeyFile string
}

// set reports whether the listeners are configured.
func (e encListen) set() bool { return e.DoT.IsValid() }

// newEncListen picks free loopback ports for a DoT and a DoH listener
// presenting the pair in certFile and keyFile.
func newEncListen(certFile, keyFile string) (encListen, error) {
	dot, err := freePort()
	if err != nil {
		return encListen{}, err
	}
	doh, err := freePort()
	if err != nil {
		return encListen{}, err
	}
	return encListen{DoT: dot, DoH: doh, CertFile: certFile, KeyFile: keyFile}, nil
}

// toml is the listeners as nxdnsd's [server] keys.
func (e encListen) toml() string {
	if !e.set() {
		return ""
	}
	return fmt.Sprintf("tls_listen = [%q]\nhttps_listen = [%q]\ncert_file = %q\nkey_file = %q\n", e.DoT, e.DoH, e.CertFile, e.KeyFile)
}

// lua is the listeners as dnsdist's configuration.
func (e encListen) lua() string {
	if !e.set() {
		return ""
	}
	return fmt.Sprintf("addTLSLocal(%q, %q, %q)\naddDOHLocal(%q, %q, %q, \"/dns-query\")\n",
		e.DoT, e.CertFile, e.KeyFile, e.DoH, e.CertFile, e.KeyFile)
}

// encRuns are the encrypted rows.
type encRuns struct {
	nxDoT, nxDoH *fwdRun // nil when the nxdnsd under test refused the listeners (note says why)
	ddDoT, ddDoH *fwdRun // nil when dnsdist is skipped
	note         string
}

// writeListenerPair issues a certificate for fake.TLSName and 127.0.0.1
// and writes it, with its key, into dir.
func writeListenerPair(dir string) (certFile, keyFile string, err error) {
	ca, err := fake.NewCA(caLifetime)
	if err != nil {
		return "", "", err
	}
	cert, err := ca.Issue(fake.TLSName, "127.0.0.1")
	if err != nil {
		return "", "", err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", "", err
	}
	return testca.WritePair(abs, "listener.crt", "listener.key", cert)
}

// measureEncrypted runs the encrypted rows: an nxdnsd with its cache on,
// then dnsdist with a packet cache (unless skipped), each with a DoT and a
// DoH listener on the same certificate, dnsperf over DoT then DoH
// (GET, dnsperf's default) through each.
func measureEncrypted(ctx context.Context, c runConfig, dir string, cache cacheProbe, primary, secondary *fake.Server,
	upstream func() uint64, progress func(string, ...any)) (*encRuns, error) {
	queries := filepath.Join(dir, "hits.txt")
	if err := writeQueryFile(queries, "h", c.hitNames); err != nil {
		return nil, err
	}
	certFile, keyFile, err := writeListenerPair(dir)
	if err != nil {
		return nil, err
	}
	pc := c
	pc.perf.Clients = encClients
	e := &encRuns{}
	// both runs dnsperf over DoT, then DoH, at ch's listeners enc.
	both := func(ch *child, who, cached string, enc encListen, dot, doh **fwdRun) error {
		for _, m := range []struct {
			mode string
			addr netip.AddrPort
			dst  **fwdRun
		}{{"dot", enc.DoT, dot}, {"doh", enc.DoH, doh}} {
			pc.perf.Mode = m.mode
			progress("encrypted: dnsperf -m %s %s -> %s %s, %s", m.mode, pc.perf, who, m.addr, cached)
			r, err := measure(ctx, pc, ch, m.addr, queries, upstream, nil)
			if err != nil {
				return err
			}
			*m.dst = r
		}
		return nil
	}

	conf, err := c.nxdnsdConf(primary, secondary, 32, "")
	if err != nil {
		return nil, err
	}
	conf.Cache = cache.enabled(true)
	if conf.Enc, err = newEncListen(certFile, keyFile); err != nil {
		return nil, err
	}
	nx, err := startChild(ctx, c.nxdnsd, dir, "encrypted", conf)
	if err != nil {
		// A build from before the encrypted listeners refuses their keys.
		e.note = "nxdnsd: " + lastLines(err.Error(), 1)
	} else {
		defer nx.stop()
		if err := both(nx, "nxdnsd", "cache on", conf.Enc, &e.nxDoT, &e.nxDoH); err != nil {
			return nil, err
		}
		nx.stop()
	}
	if !c.dnsdist {
		return e, nil
	}
	dconf, err := newDnsdistConf(primary.Addr(), secondary.Addr(), packetCacheEntries)
	if err != nil {
		return nil, err
	}
	if dconf.Enc, err = newEncListen(certFile, keyFile); err != nil {
		return nil, err
	}
	dd, err := startDnsdist(ctx, c.dnsdistBin, dir, "dnsdist-encrypted", dconf)
	if err != nil {
		return nil, err
	}
	defer dd.stop()
	if err := both(dd, "dnsdist", "packet cache", dconf.Enc, &e.ddDoT, &e.ddDoH); err != nil {
		return nil, err
	}
	return e, nil
}

// writeEncrypted is the encrypted rows' table: each nxdnsd row's ratio is
// to dnsdist's row of the same mode.
func (r *report) writeEncrypted(b *strings.Builder, e *encRuns) {
	c := r.cfg
	p := c.perf
	p.Clients = encClients
	fmt.Fprintf(b, "\n### Encrypted listeners: dnsperf -m dot / -m doh %s, %s names asked over and over, caches on\n\n", p, thousands(float64(c.hitNames)))
	if e.note != "" {
		fmt.Fprintf(b, "nxdnsd not measured: %s\n\n", e.note)
	}
	skip := "not measured: " + c.dnsdistSkip
	for _, m := range []struct {
		mode   string
		nx, dd *fwdRun
	}{{"DoT", e.nxDoT, e.ddDoT}, {"DoH", e.nxDoH, e.ddDoH}} {
		ref := m.dd
		if ref == nil {
			ref = m.nx
		}
		if ref == nil {
			continue
		}
		fmt.Fprintf(b, "%s (ratio: to dnsdist's %s row):\n\n", m.mode, m.mode)
		r.writeRuns(b, ref, []namedRun{
			{name: "dnsperf → nxdnsd (cache on) → fake", run: m.nx, missing: "not measured"},
			{name: "dnsperf → dnsdist (packet cache) → fake", run: m.dd, missing: skip},
		})
		b.WriteString("\n")
	}
	fmt.Fprintf(b, "The columns as in the throughput table. Both listen with the same ECDSA P-256 certificate; DoH is GET over HTTP/2 (dnsperf's default); "+
		"%d persistent connections, -q queries outstanding across them.\n", encClients)
}

// verdictEncrypted is issue 31's check: nxdnsd's DoT and DoH QPS at least
// dnsdist's, and its CPU per query at most dnsdist's.
func (r *report) verdictEncrypted(check func(bool, string, ...any), notChecked func(string, ...any), e *encRuns) {
	if e == nil {
		notChecked("issue 31, encrypted listeners: -encrypted=false")
		return
	}
	for _, m := range []struct {
		mode   string
		nx, dd *fwdRun
	}{{"DoT", e.nxDoT, e.ddDoT}, {"DoH", e.nxDoH, e.ddDoH}} {
		switch {
		case m.nx == nil:
			check(false, "issue 31, %s: nxdnsd not measured (%s)", m.mode, e.note)
			continue
		case m.dd == nil:
			notChecked("issue 31, %s against dnsdist: dnsdist not measured (%s)", m.mode, r.cfg.dnsdistSkip)
			continue
		}
		check(m.nx.perf.QPS >= m.dd.perf.QPS, "issue 31, %s: nxdnsd QPS %s >= dnsdist's %s", m.mode, thousands(m.nx.perf.QPS), thousands(m.dd.perf.QPS))
		nc, ok1 := m.nx.cpuPerQuery()
		dc, ok2 := m.dd.cpuPerQuery()
		if !ok1 || !ok2 {
			notChecked("issue 31, %s: CPU per query not measured (nxdnsd %s, dnsdist %s)", m.mode, usPerQuery(m.nx), usPerQuery(m.dd))
			continue
		}
		check(nc <= dc, "issue 31, %s: nxdnsd CPU per query %.2f µs <= dnsdist's %.2f µs", m.mode, nc, dc)
	}
}
