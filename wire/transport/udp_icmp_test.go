package transport

import (
	"errors"
	"net"
	"syscall"
	"testing"

	"github.com/miekg/dns"
)

// An ICMP error costs only the exchange whose query it quotes. Five
// exchanges wait on a server that holds their queries; the server's port
// closes, and a sixth query earns a real ICMP port unreachable. The sixth
// fails with ECONNREFUSED; the five go on waiting, and are answered when a
// server on the same port sends their answers. Before the fix every
// exchange waiting on the shared socket failed with the sixth's
// error (one forged ICMP datagram, many recorded failures): the five
// failed here with ECONNREFUSED instead of their answers.
func TestUDPICMPErrorFailsOnlyItsQuery(t *testing.T) {
	for _, kind := range udpKinds {
		t.Run(kind.name, func(t *testing.T) { testICMPErrorFailsOnlyItsQuery(t, kind.new) })
	}
}

func testICMPErrorFailsOnlyItsQuery(t *testing.T, newUDP func(testing.TB, string) *UDP) {
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().(*net.UDPAddr)
	u := newUDP(t, addr.String())

	const held = 5
	results := make(chan error, held)
	for range held {
		go func() {
			m := new(dns.Msg)
			m.SetQuestion("held.example.", dns.TypeA)
			_, err := exchangeMsg(ctxWithin(t, answerTimeout), u, m)
			results <- err
		}()
	}
	// The server reads the five queries and answers none yet.
	type datagram struct {
		b    []byte
		from *net.UDPAddr
	}
	var queries []datagram
	for range held {
		buf := make([]byte, 512)
		n, from, err := pc.ReadFromUDP(buf)
		if err != nil {
			t.Fatal(err)
		}
		queries = append(queries, datagram{buf[:n], from})
	}
	pc.Close() // the port is closed: the next query earns an ICMP error

	m := new(dns.Msg)
	m.SetQuestion("refused.example.", dns.TypeA)
	if _, err := exchangeMsg(ctxWithin(t, answerTimeout), u, m); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("the query sent to the closed port: %v, want ECONNREFUSED", err)
	}

	// The same port again, answering the five held queries.
	pc, err = net.ListenUDP("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	for _, q := range queries {
		var req dns.Msg
		if err := req.Unpack(q.b); err != nil {
			t.Fatal(err)
		}
		ans := new(dns.Msg)
		ans.SetReply(&req)
		out, err := ans.Pack()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pc.WriteToUDP(out, q.from); err != nil {
			t.Fatal(err)
		}
	}
	for range held {
		if err := <-results; err != nil {
			t.Errorf("a held exchange failed: %v, want its answer", err)
		}
	}
}
