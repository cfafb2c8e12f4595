package daemon

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/internal/sdnotify"
	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// Run under a service manager: READY=1 once serving, RELOADING=1 and
// READY=1 around a SIGHUP's reload (which sets the log level), STOPPING=1
// when its context ends.
func TestRunNotifiesAroundReloads(t *testing.T) {
	up := wiretest.NewServer(t, wiretest.Answer())
	src := reloadSrc(upstreamTOML(up.Addr))
	cfg, err := config.Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	n, err := sdnotify.New(sock)
	if err != nil {
		t.Fatal(err)
	}
	level := zap.NewAtomicLevelAt(zapcore.InfoLevel)
	reloads := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, cfg, nil, RunOptions{
			Reload:   reloads,
			Load:     func() (*config.Config, error) { return config.Parse([]byte(src + "\n[log]\nlevel = \"debug\"\n")) },
			Level:    &level,
			Notifier: n,
		})
	}()
	next := func() string {
		t.Helper()
		buf := make([]byte, 4096)
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second)) // a bound for a broken Run, not a wait for timing
		k, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("no notification: %v", err)
		}
		return string(buf[:k])
	}
	if msg := next(); !strings.HasPrefix(msg, "READY=1\nSTATUS=serving DNS: udp 127.0.0.1:") {
		t.Fatalf("first: %q", msg)
	}
	reloads <- syscall.SIGHUP
	if msg := next(); !strings.HasPrefix(msg, "RELOADING=1\nMONOTONIC_USEC=") {
		t.Fatalf("at SIGHUP: %q", msg)
	}
	if msg := next(); !strings.HasPrefix(msg, "READY=1\n") || strings.Contains(msg, "failed") {
		t.Fatalf("after the reload: %q", msg)
	}
	if level.Level() != zapcore.DebugLevel {
		t.Errorf("log level after the reload: %v, want debug", level.Level())
	}
	cancel()
	if msg := next(); msg != "STOPPING=1" {
		t.Errorf("at the end: %q", msg)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Without -c there is no file to read again: a SIGHUP changes nothing,
// and says so.
func TestRunSIGHUPWithoutAFile(t *testing.T) {
	up := wiretest.NewServer(t, wiretest.Answer())
	cfg, err := config.Parse([]byte(reloadSrc(upstreamTOML(up.Addr))))
	if err != nil {
		t.Fatal(err)
	}
	said := make(chan string, 64)
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zapcore.InfoLevel)
	log := zap.New(core, zap.Hooks(func(e zapcore.Entry) error {
		select {
		case said <- e.Message:
		default: // the test reads until it has what it waits for; later lines may go
		}
		return nil
	}))
	reloads := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, log, RunOptions{Reload: reloads}) }()
	for msg := range said {
		if msg == "nxdnsd started" {
			break
		}
	}
	reloads <- syscall.SIGHUP
	for msg := range said {
		if strings.HasPrefix(msg, "SIGHUP: running on the embedded default") {
			break
		}
		if msg == "configuration reloaded" {
			t.Error("reloaded without a file")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
