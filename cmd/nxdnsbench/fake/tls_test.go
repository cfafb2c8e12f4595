package fake

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// pipelineTimeout bounds a whole pipelined test connection: handshake,
// writes and reads, on a busy machine under the race detector.
const pipelineTimeout = 10 * time.Second

// TestTLSPipelined sends many queries on one DoT connection at once, every
// frame in one write, before reading any answer, then checks that each is
// answered once, with its ID and question, and that the connection goes on
// serving a second batch.
func TestTLSPipelined(t *testing.T) {
	t.Parallel()
	s, client := startTLSFake(t, Mode{})
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: pipelineTimeout}, "tcp", s.TLSAddr().String(), client)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(pipelineTimeout)); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)

	const batch = 300 // more than one TLS record of queries and of answers
	for round := range 2 {
		want := make(map[uint16]dns.Question, batch)
		var frames []byte
		for i := range batch {
			qtype := dns.TypeA
			if i%3 == 0 {
				qtype = dns.TypeAAAA
			}
			q := new(dns.Msg).SetQuestion(fmt.Sprintf("q%d-%d.bench.example.", round, i), qtype)
			q.Id = uint16(round*batch + i + 1)
			q.SetEdns0(1232, false)
			b, err := q.Pack()
			if err != nil {
				t.Fatal(err)
			}
			frames = binary.BigEndian.AppendUint16(frames, uint16(len(b)))
			frames = append(frames, b...)
			want[q.Id] = q.Question[0]
		}
		if _, err := conn.Write(frames); err != nil {
			t.Fatalf("round %d: writing %d pipelined queries: %v", round, batch, err)
		}
		for range batch {
			var l [2]byte
			if _, err := io.ReadFull(r, l[:]); err != nil {
				t.Fatalf("round %d: %d answers missing: %v", round, len(want), err)
			}
			b := make([]byte, binary.BigEndian.Uint16(l[:]))
			if _, err := io.ReadFull(r, b); err != nil {
				t.Fatalf("round %d: reading an answer: %v", round, err)
			}
			m := new(dns.Msg)
			if err := m.Unpack(b); err != nil {
				t.Fatalf("round %d: unpacking an answer: %v", round, err)
			}
			q, ok := want[m.Id]
			if !ok {
				t.Fatalf("round %d: an answer with ID %d, unasked or answered twice", round, m.Id)
			}
			delete(want, m.Id)
			if !m.Response || m.Rcode != dns.RcodeSuccess || len(m.Question) != 1 || m.Question[0] != q {
				t.Fatalf("round %d: answer to %v: %v", round, q, m)
			}
			if len(m.Answer) != 1 || m.Answer[0].Header().Name != q.Name || m.Answer[0].Header().Rrtype != q.Qtype {
				t.Fatalf("round %d: answer to %v has %v", round, q, m.Answer)
			}
			if m.IsEdns0() == nil {
				t.Fatalf("round %d: answer to %v lost the OPT record", round, q)
			}
		}
	}
	st := s.Stats()
	if st.Queries != 2*batch || st.Answers != 2*batch || st.TLSConns != 1 || st.TCPConns != 0 || st.Dropped != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestTLSVerification checks the certificate: it verifies for TLSName and
// for 127.0.0.1 with the CA's pool, and for no other name, and a client
// without the CA refuses it.
func TestTLSVerification(t *testing.T) {
	t.Parallel()
	s, client := startTLSFake(t, Mode{})
	dial := func(conf *tls.Config) error {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: pipelineTimeout}, "tcp", s.TLSAddr().String(), conf)
		if err == nil {
			err = conn.Close()
		}
		return err
	}
	if err := dial(client); err != nil {
		t.Errorf("as %s: %v", TLSName, err)
	}
	byIP := client.Clone()
	byIP.ServerName = "127.0.0.1"
	if err := dial(byIP); err != nil {
		t.Errorf("as 127.0.0.1: %v", err)
	}
	other := client.Clone()
	other.ServerName = "other.test"
	if err := dial(other); err == nil {
		t.Error("verified for other.test")
	}
	if err := dial(&tls.Config{ServerName: TLSName, MinVersion: tls.VersionTLS12}); err == nil {
		t.Error("verified with the system roots")
	}
}

// TestTLSOff checks that a fake started without TLS has no DoT address.
func TestTLSOff(t *testing.T) {
	t.Parallel()
	if ap := startFake(t, Mode{}).TLSAddr(); ap.IsValid() {
		t.Fatalf("TLSAddr %v without Config.TLS", ap)
	}
}
