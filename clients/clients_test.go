package clients

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nxdnsd/nxdnsd/config"
)

var t0 = time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)

// A leases file rewritten while nxdnsd runs renames the client, and a
// group written with the name follows the address.
func TestLeaseRewriteRenamesClient(t *testing.T) {
	t.Parallel()
	clk := newClock(t0)
	path := tempFile(t, "dnsmasq.leases", fmt.Sprintf("%d aa:bb:cc:dd:ee:01 192.168.1.50 tablet 01:aa:bb:cc:dd:ee:01\n", clk.Unix(time.Hour)))
	ch := newChanges()
	d := New(Config{LeasesFiles: []string{path}, PollInterval: 5 * time.Millisecond, Now: clk.Now, OnChange: ch.OnChange}, nil, nil)
	defer d.Close()
	a := addr("192.168.1.50")
	if got := d.Name(a); got != "tablet" {
		t.Fatalf("Name = %q, want tablet", got)
	}
	writeFile(t, path, fmt.Sprintf("%d aa:bb:cc:dd:ee:01 192.168.1.50 phone *\n%d aa:bb:cc:dd:ee:02 192.168.1.51 tablet *\n",
		clk.Unix(time.Hour), clk.Unix(time.Hour)))
	ch.waitFor(t, "the client renamed phone", func() bool { return d.Name(a) == "phone" })
	if got := d.Addresses("Tablet"); !slices.Equal(got, []netip.Addr{addr("192.168.1.51")}) {
		t.Errorf("Addresses(Tablet) = %v, want the tablet's new address", got)
	}
	if got := d.Name(addr("::ffff:192.168.1.50")); got != "phone" {
		t.Errorf("an IPv4-mapped address is named %q", got)
	}
}

func TestExpiredLeasesIgnored(t *testing.T) {
	t.Parallel()
	clk := newClock(t0)
	path := tempFile(t, "leases", fmt.Sprintf(
		"%d 11:11:11:11:11:11 192.168.1.10 gone *\n"+
			"%d 22:22:22:22:22:22 192.168.1.11 soon *\n"+
			"0 33:33:33:33:33:33 192.168.1.12 forever *\n"+
			"duid 00:01:00:01:2c:aa:bb:cc:00:11:22:33:44:55\n"+
			"%d 12345678 fd00::12 laptop6 00:01:00:01:aa\n",
		clk.Unix(-time.Second), clk.Unix(time.Minute), clk.Unix(time.Hour)))
	d := New(Config{LeasesFiles: []string{path}, PollInterval: time.Hour, Now: clk.Now}, nil, nil)
	defer d.Close()
	for a, want := range map[string]string{"192.168.1.10": "", "192.168.1.11": "soon", "192.168.1.12": "forever", "fd00::12": "laptop6"} {
		if got := d.Name(addr(a)); got != want {
			t.Errorf("Name(%s) = %q, want %q", a, got, want)
		}
	}
	// The lease ends with the file unchanged: the next poll drops it.
	clk.Add(time.Minute)
	if !d.poll() {
		t.Error("poll after a lease ended built nothing")
	}
	if got := d.Name(addr("192.168.1.11")); got != "" {
		t.Errorf("an ended lease still names its client %q", got)
	}
	if got := d.Name(addr("192.168.1.12")); got != "forever" {
		t.Errorf("the infinite lease is gone: %q", got)
	}
	if d.poll() {
		t.Error("poll with nothing changed built the table again")
	}
}

func TestBadLinesCountedMissingFileLoggedOnce(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zap.DebugLevel)
	hosts := tempFile(t, "hosts", "# comment\n"+
		"192.168.1.2 nas nas.lan # the NAS\n"+
		"not-an-address printer\n"+
		"192.168.1.3\n"+
		"192.168.1.4 bad!name\n"+
		"\n"+
		"fd00::4 tv\n")
	leases := tempFile(t, "leases", "garbage\n1 2 3\n")
	missing := hosts + ".missing"
	d := New(Config{HostsFiles: []string{hosts, missing}, LeasesFiles: []string{leases}, PollInterval: time.Hour}, nil, zap.New(core))
	defer d.Close()
	if s := d.Stats(); s.BadLines != 5 || s.Named != 2 {
		t.Errorf("Stats = %+v, want 5 bad lines, 2 named", s)
	}
	if got := d.Names(addr("192.168.1.2"), nil); !slices.Equal(got, []string{"nas", "nas.lan"}) {
		t.Errorf("Names = %q", got)
	}
	if got := d.Name(addr("fd00::4")); got != "tv" {
		t.Errorf("Name(fd00::4) = %q", got)
	}
	for range 3 {
		d.poll()
	}
	d.Reload(Config{HostsFiles: []string{hosts, missing}, LeasesFiles: []string{leases}})
	if n := logs.FilterMessageSnippet("missing").Len(); n != 1 {
		t.Errorf("the missing file was logged %d times, want once", n)
	}
	bad := logs.FilterMessageSnippet("malformed").All()
	if len(bad) != 4 || bad[0].ContextMap()["first"] != int64(3) {
		t.Errorf("malformed lines logged %v, want once per read (2 files, 2 reads), hosts first at line 3", bad)
	}
	// The missing file appears: it is read.
	writeFile(t, missing, "192.168.1.9 camera\n")
	if !d.poll() || d.Name(addr("192.168.1.9")) != "camera" {
		t.Errorf("the file that appeared was not read: %q", d.Name(addr("192.168.1.9")))
	}
}

// A FIFO is refused without blocking, and not read again while it stays.
func TestNotRegularFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := dir + "/fifo"
	if err := mkfifoFunc(fifo); err != nil {
		t.Skip(err)
	}
	core, logs := observer.New(zap.DebugLevel)
	d := New(Config{HostsFiles: []string{fifo}, PollInterval: time.Hour}, nil, zap.New(core))
	defer d.Close()
	if d.poll() {
		t.Error("an unchanged FIFO was read again")
	}
	if n := logs.FilterMessageSnippet("unreadable").Len(); n != 1 {
		t.Errorf("logged %d times", n)
	}
}

// Spec section 15: clients.static, then a hosts file, then a leases file,
// then the PTR name.
func TestPrecedence(t *testing.T) {
	t.Parallel()
	clk := newClock(t0)
	hosts := tempFile(t, "hosts", "192.168.1.50 hosts-name\n192.168.1.51 hosts-only\n")
	leases := tempFile(t, "leases", fmt.Sprintf("%d m 192.168.1.50 lease-name *\n%d m 192.168.1.51 lease-2 *\n%d m 192.168.1.52 lease-only *\n",
		clk.Unix(time.Hour), clk.Unix(time.Hour), clk.Unix(time.Hour)))
	fake := &fakePTR{names: map[netip.Addr]string{addr("192.168.1.50"): "ptr-name.lan."}}
	ch := newChanges()
	d := New(Config{
		Static:     []Static{{Name: "tablet", Addrs: []netip.Addr{addr("192.168.1.50"), addr("fd00::50")}}},
		HostsFiles: []string{hosts}, LeasesFiles: []string{leases}, ReverseLookup: true,
		PollInterval: time.Hour, Now: clk.Now, OnChange: ch.OnChange,
	}, fake.lookup, nil)
	defer d.Close()
	for a, want := range map[string]string{"192.168.1.50": "tablet", "fd00::50": "tablet", "192.168.1.51": "hosts-only", "192.168.1.52": "lease-only"} {
		if got := d.Name(addr(a)); got != want {
			t.Errorf("Name(%s) = %q, want %q", a, got, want)
		}
	}
	a := addr("192.168.1.50")
	d.Names(a, nil) // asks for the PTR name, which comes last
	ch.waitFor(t, "the PTR name", func() bool { return len(d.Names(a, nil)) == 5 })
	if got := d.Names(a, nil); !slices.Equal(got, []string{"tablet", "hosts-name", "lease-name", "ptr-name.lan", "ptr-name"}) {
		t.Errorf("Names = %q", got)
	}
	if got := d.Name(a); got != "tablet" {
		t.Errorf("Name = %q after the PTR answer", got)
	}
}

// A private address with no other name is named by its PTR record, looked
// up in the background: the first query gets no name, a later one does.
func TestPTRNamesClient(t *testing.T) {
	t.Parallel()
	a := addr("192.168.1.77")
	fake := &fakePTR{names: map[netip.Addr]string{a: "laptop.lan.", addr("fd00::77"): "laptop.lan."}}
	ch := newChanges()
	d := New(Config{ReverseLookup: true, PollInterval: time.Hour, OnChange: ch.OnChange}, fake.lookup, nil)
	defer d.Close()
	d.Name(addr("8.8.8.8"))   // public: never looked up
	d.Name(addr("127.0.0.1")) // loopback: never looked up
	d.Name(addr("192.168.1.78"))
	d.Name(a)
	ch.waitFor(t, "the PTR name", func() bool { return d.Name(a) == "laptop.lan" })
	if got := d.Names(a, nil); !slices.Equal(got, []string{"laptop.lan", "laptop"}) {
		t.Errorf("Names = %q", got)
	}
	// 192.168.1.78 has no PTR name: remembered, not asked again.
	ch.waitFor(t, "the absence remembered", func() bool { return fake.callsOf(addr("192.168.1.78")) == 1 && d.Stats().PTRLookups == 2 })
	for range 10 {
		d.Name(addr("192.168.1.78"))
	}
	d.Name(addr("fd00::77"))
	ch.waitFor(t, "the second client", func() bool { return d.Name(addr("fd00::77")) == "laptop.lan" })
	if got := d.Addresses("laptop"); len(got) != 2 {
		t.Errorf("Addresses(laptop) = %v", got)
	}
	for _, x := range []string{"8.8.8.8", "127.0.0.1", "192.168.1.78"} {
		if n := fake.callsOf(addr(x)); n != map[string]int{"192.168.1.78": 1}[x] {
			t.Errorf("%s looked up %d times", x, n)
		}
	}
	// Reverse lookups off: the PTR names go.
	d.Reload(Config{ReverseLookup: false})
	if got := d.Name(a); got != "" {
		t.Errorf("Name = %q with reverse_lookup off", got)
	}
}

// At most one lookup per address is in flight, however many queries it
// sends, and at most MaxLookups in all.
func TestLookupsBounded(t *testing.T) {
	t.Parallel()
	fake := &fakePTR{hold: make(chan struct{}), started: make(chan netip.Addr, 64), names: map[netip.Addr]string{}}
	for i := range 10 {
		fake.names[netip.AddrFrom4([4]byte{10, 0, 0, byte(i)})] = fmt.Sprintf("host%d", i)
	}
	ch := newChanges()
	d := New(Config{ReverseLookup: true, MaxLookups: 2, PollInterval: time.Hour, OnChange: ch.OnChange}, fake.lookup, nil)
	defer d.Close()
	first := addr("10.0.0.0")
	for range 1000 {
		d.Name(first)
	}
	<-fake.started
	for i := range 10 {
		for range 100 {
			d.Name(netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}))
		}
	}
	<-fake.started // the second lookup in flight
	close(fake.hold)
	// Every client is named in the end, as its queries go on.
	ch.waitFor(t, "every client named", func() bool {
		named := 0
		for i := range 10 {
			if d.Name(netip.AddrFrom4([4]byte{10, 0, 0, byte(i)})) != "" {
				named++
			}
		}
		return named == 10
	})
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if fake.maxIn > 2 {
		t.Errorf("%d lookups in flight at once, want at most 2", fake.maxIn)
	}
	for a, n := range fake.calls {
		if n != 1 {
			t.Errorf("%s looked up %d times", a, n)
		}
	}
}

// A PTR answer is kept PTRTTL: then the next query asks again, the old
// name serving meanwhile; one not asked again for another PTRTTL goes.
func TestPTRExpiry(t *testing.T) {
	t.Parallel()
	clk := newClock(t0)
	a := addr("192.168.1.30")
	fake := &fakePTR{names: map[netip.Addr]string{a: "old"}}
	ch := newChanges()
	d := New(Config{ReverseLookup: true, PollInterval: time.Hour, Now: clk.Now, OnChange: ch.OnChange}, fake.lookup, nil)
	defer d.Close()
	d.Name(a)
	ch.waitFor(t, "the name", func() bool { return d.Name(a) == "old" })
	clk.Add(30 * time.Minute)
	if d.sweep(clk.Now()) {
		t.Error("swept an answer half an hour old")
	}
	fake.mu.Lock()
	fake.names[a] = "new"
	fake.mu.Unlock()
	clk.Add(31 * time.Minute)
	if !d.sweep(clk.Now()) {
		t.Fatal("an answer an hour old was not swept")
	}
	if got := d.Name(a); got != "old" {
		t.Errorf("a stale name serves until the new one: got %q", got)
	}
	ch.waitFor(t, "the new name", func() bool { return d.Name(a) == "new" })
	// Asked no more: stale after an hour, gone after two.
	clk.Add(61 * time.Minute)
	d.sweep(clk.Now())
	clk.Add(61 * time.Minute)
	d.sweep(clk.Now())
	if _, ok := d.ptr.Load().m.get(a); ok {
		t.Error("an answer not asked for two hours is kept")
	}
}

// Close ends a lookup in flight (goleak checks the rest).
func TestCloseEndsLookups(t *testing.T) {
	t.Parallel()
	fake := &fakePTR{hold: make(chan struct{}), started: make(chan netip.Addr, 1)}
	d := New(Config{ReverseLookup: true}, fake.lookup, nil)
	d.Name(addr("192.168.7.7"))
	<-fake.started
	d.Close()
	if got := d.Name(addr("192.168.7.7")); got != "" {
		t.Errorf("Name after Close = %q", got)
	}
}

func TestNameAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	fake := &fakePTR{hold: make(chan struct{})}
	d := New(Config{Static: []Static{{Name: "tv", Addrs: []netip.Addr{addr("192.168.1.5")}}}, ReverseLookup: true, PollInterval: time.Hour}, fake.lookup, nil)
	defer d.Close()
	buf := make([]string, 0, 8)
	for _, a := range []netip.Addr{addr("192.168.1.5"), addr("::ffff:192.168.1.5"), addr("192.168.1.6"), addr("9.9.9.9")} {
		if n := testing.AllocsPerRun(100, func() { d.Name(a); d.Names(a, buf[:0]) }); n != 0 {
			t.Errorf("Name(%s) allocates %v times", a, n)
		}
	}
}

func TestFromConfig(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse([]byte("[clients]\nreverse_lookup = false\nhosts_files = [\"/etc/hosts\"]\n" +
		"[[clients.static]]\nname = \"tablet\"\naddresses = [\"192.168.1.50\"]\n" +
		"[[upstreams]]\naddress = \"udp://9.9.9.9:53\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := FromConfig(cfg.Clients)
	if c.ReverseLookup || !slices.Equal(c.HostsFiles, []string{"/etc/hosts"}) || len(c.Static) != 1 ||
		c.Static[0].Name != "tablet" || !slices.Equal(c.Static[0].Addrs, []netip.Addr{addr("192.168.1.50")}) {
		t.Errorf("FromConfig = %+v", c)
	}
}

func TestPTRHelpers(t *testing.T) {
	t.Parallel()
	for a, want := range map[string]string{
		"192.168.1.20":        "20.1.168.192.in-addr.arpa.",
		"::ffff:192.168.1.20": "20.1.168.192.in-addr.arpa.",
		"fd00::1":             "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.",
	} {
		if got := ReverseName(addr(a)); got != want {
			t.Errorf("ReverseName(%s) = %q", a, got)
		}
	}
	q := PTRQuery(addr("192.168.1.20"))
	ans := new(dns.Msg)
	ans.SetReply(q)
	if _, err := PTRName(ans); !errors.Is(err, ErrNoPTR) {
		t.Errorf("empty answer: %v", err)
	}
	rr, _ := dns.NewRR("20.1.168.192.in-addr.arpa. 60 IN PTR tablet.lan.")
	other, _ := dns.NewRR("21.1.168.192.in-addr.arpa. 60 IN PTR other.lan.")
	ans.Answer = []dns.RR{other, rr}
	if got, err := PTRName(ans); got != "tablet.lan." || err != nil {
		t.Errorf("PTRName = %q, %v", got, err)
	}
	ans.Rcode = dns.RcodeNameError
	if _, err := PTRName(ans); !errors.Is(err, ErrNoPTR) {
		t.Errorf("NXDOMAIN: %v", err)
	}
	ans.Rcode = dns.RcodeServerFailure
	if _, err := PTRName(ans); err == nil || errors.Is(err, ErrNoPTR) {
		t.Errorf("SERVFAIL: %v", err)
	}
}

// An address is named whatever its form: IPv4-mapped, with a zone.
func TestAddressForms(t *testing.T) {
	t.Parallel()
	hosts := tempFile(t, "hosts", "fe80::1%eth0 router\n::ffff:192.168.1.7 printer\nfd00::7 nas\n")
	d := New(Config{HostsFiles: []string{hosts}, PollInterval: time.Hour}, nil, nil)
	defer d.Close()
	for a, want := range map[string]string{"fe80::1": "router", "fe80::1%wlan0": "router", "192.168.1.7": "printer",
		"::ffff:192.168.1.7": "printer", "fd00::7": "nas", "fd00::8": ""} {
		if got := d.Name(addr(a)); got != want {
			t.Errorf("Name(%s) = %q, want %q", a, got, want)
		}
	}
	if got := d.Addresses("printer"); !slices.Equal(got, []netip.Addr{addr("192.168.1.7")}) {
		t.Errorf("Addresses(printer) = %v", got)
	}
}
