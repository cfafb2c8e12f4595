package daemon

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	zapobserver "go.uber.org/zap/zaptest/observer"

	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// A warm-restart file with a valid checksum whose one entry announces an
// answer of 0xFFFFFFF0 bytes (issue 25: a panic on 32 bits, out of memory
// on 64, exit 2) is logged and ignored: the daemon starts cold and serves.
// cache's TestLoadCraftedLengths and FuzzLoad prove the reader; this
// proves what start-up does with its error.
func TestCacheCraftedFileIsLoggedAndIgnored(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache")
	b := []byte("NXDC\x00\x01\x00\x00")
	b = binary.BigEndian.AppendUint16(b, uint16(len("y.example.")))
	b = append(b, "y.example."...)
	b = append(b, 0, 1, 0, 1, 0)             // type, class, flags
	b = binary.BigEndian.AppendUint64(b, 1)  // stored
	b = binary.BigEndian.AppendUint32(b, 60) // life
	b = binary.BigEndian.AppendUint32(b, 0xFFFFFFF0)
	b = binary.BigEndian.AppendUint32(b, 1) // count
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	up := wiretest.NewServer(t, wiretest.Answer(wiretest.A("example.com.", 0)))
	cfg, err := config.Parse([]byte(reloadSrc(upstreamTOML(up.Addr) + cacheTOML("path = "+`"`+path+`"`))))
	if err != nil {
		t.Fatal(err)
	}
	core, logs := zapobserver.New(zapcore.InfoLevel)
	s := startConfig(t, cfg, zap.New(core), options{})
	if s.d.cache.Entries() != 0 {
		t.Errorf("%d entries loaded", s.d.cache.Entries())
	}
	if r := ask(t, "udp", s.udp, wiretest.Query("example.com.", dns.TypeA)); r.Rcode != dns.RcodeSuccess {
		t.Errorf("after start: %s", dns.RcodeToString[r.Rcode])
	}
	warned := logs.FilterMessage("the saved cache is unusable: starting cold").All()
	if len(warned) != 1 || !strings.Contains(warned[0].ContextMap()["error"].(string), "damaged cache file") {
		t.Errorf("logged %v, want one warning that the file is damaged", logs.All())
	}
}
