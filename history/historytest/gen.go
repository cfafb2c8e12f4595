// Package historytest generates query histories for the history
// package's tests and benchmarks: the traffic of a busy network, made
// up deterministically from a seed.
package historytest

import (
	"fmt"
	"iter"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/nxdnsd/nxdnsd/history"
)

// Network describes the traffic Rows makes up. The zero values of the
// counts take the figures of the acceptance test: 2,000 names
// asked Zipf-like, 50,000 one-off names a day, 40 clients.
type Network struct {
	Popular    int     // names asked again and again, Zipf-like
	OneOffDay  int     // names asked once, per day
	Clients    int     // client addresses, Zipf-like too
	Seed       uint64  // the same seed makes the same rows
	ZipfS      float64 // the Zipf exponent; 0 is 1.1
	OneOffRate float64 // the share of rows with a one-off name; 0 derives it from the counts
}

func (n Network) withDefaults() Network {
	if n.Popular == 0 {
		n.Popular = 2000
	}
	if n.OneOffDay == 0 {
		n.OneOffDay = 50000
	}
	if n.Clients == 0 {
		n.Clients = 40
	}
	if n.ZipfS == 0 {
		n.ZipfS = 1.1
	}
	return n
}

// Upstreams and Lists are the upstream and blocklist names the rows use.
var (
	Upstreams = []string{"quad9", "cloudflare", "192.168.1.1:53"}
	Lists     = []string{"stevenblack", "oisd", "custom"}
)

// Rows yields count rows evenly spread over [from, to), in time order.
// Each yields a fresh Row; names and client names are built once and
// shared between rows, as the query path's strings are.
func (n Network) Rows(from, to time.Time, count int) iter.Seq[history.Row] {
	n = n.withDefaults()
	return func(yield func(history.Row) bool) {
		r := rand.New(rand.NewPCG(n.Seed, n.Seed^0x9e3779b97f4a7c15))
		popular := make([]string, n.Popular)
		for i := range popular {
			popular[i] = fmt.Sprintf("www.site%d.example.com.", i)
		}
		zipf := rand.NewZipf(r, n.ZipfS, 1, uint64(n.Popular-1))
		clients := make([]netip.Addr, n.Clients)
		names := make([]string, n.Clients)
		for i := range clients {
			clients[i] = netip.AddrFrom4([4]byte{192, 168, 1, byte(10 + i)})
			if i%2 == 0 {
				names[i] = fmt.Sprintf("host-%d", i)
			}
		}
		czipf := rand.NewZipf(r, 1.2, 1, uint64(n.Clients-1))
		span := to.Sub(from)
		oneOffs := float64(n.OneOffDay) * span.Hours() / 24
		rate := n.OneOffRate
		if rate == 0 {
			rate = min(1, oneOffs/float64(count))
		}
		step := span / time.Duration(max(count, 1))
		oneOff := 0
		for i := range count {
			t := from.Add(time.Duration(i)*step + time.Duration(r.Int64N(int64(max(step, 1)))))
			row := history.Row{Time: t, Proto: "udp", QType: 1}
			if r.Float64() < rate {
				row.QName = fmt.Sprintf("x%d-%x.tracker%d.example.net.", oneOff, r.Uint32(), oneOff%97)
				oneOff++
			} else {
				row.QName = popular[zipf.Uint64()]
			}
			c := czipf.Uint64()
			row.Client, row.ClientName = clients[c], names[c]
			switch x := r.IntN(100); {
			case x < 55:
				row.QType = 1
			case x < 90:
				row.QType = 28
			case x < 98:
				row.QType = 65
			default:
				row.QType = 12
			}
			if r.IntN(20) == 0 {
				row.Proto = "tcp"
			}
			switch x := r.IntN(100); {
			case x < 58:
				row.Source, row.Duration = "cache", time.Duration(15+r.IntN(60))*time.Microsecond
			case x < 88:
				row.Source, row.Upstream = "pool", Upstreams[r.IntN(2)]
				row.Duration = time.Duration(4+r.IntN(60)) * time.Millisecond
			case x < 94:
				row.Source, row.List = "blocked", Lists[r.IntN(len(Lists))]
				row.Duration = time.Duration(20+r.IntN(40)) * time.Microsecond
			case x < 96:
				row.Source, row.Upstream = "forward_zone", Upstreams[2]
				row.Duration = time.Duration(1+r.IntN(3)) * time.Millisecond
			case x < 97:
				row.Source = "stale"
			case x < 99:
				row.Source = "local"
			default:
				row.Source = "special"
			}
			switch x := r.IntN(200); {
			case x < 10:
				row.Rcode = 3 // NXDOMAIN
			case x < 11:
				row.Rcode = 2 // SERVFAIL
			}
			if !yield(row) {
				return
			}
		}
	}
}
