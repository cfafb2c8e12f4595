// Command nxdnsd is a DNS forwarder for home and edge networks.
//
//	nxdnsd                    run on the embedded default configuration
//	nxdnsd -c FILE            run with the TOML configuration FILE
//	nxdnsd -c FILE -check     validate only: exit 0 when valid, else 2
//	nxdnsd -version           print the version
//
// SIGINT and SIGTERM stop it gracefully; SIGUSR1 reopens the query log
// file, for logrotate.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/daemon"
)

// version and commit are set at build time with
// -ldflags "-X main.version=… -X main.commit=…" (go tool task release
// stamps git describe and the commit hash). A plain go build leaves commit
// empty, and -version then reports the commit the Go toolchain recorded,
// if any.
var (
	version = "0.1.0-dev"
	commit  = ""
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1 // could not start or serve
	exitConfig = 2 // the configuration is invalid; every problem was printed
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole program: flags, configuration, logger, daemon. It
// returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("nxdnsd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("c", "", "TOML configuration `file` (default: the embedded default)")
	check := fs.Bool("check", false, "validate the configuration and exit: 0 when valid, 2 otherwise")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return exitConfig
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "nxdnsd: unexpected arguments: %v\n", fs.Args())
		return exitConfig
	}
	if *showVersion {
		fmt.Fprintln(stdout, versionLine())
		return exitOK
	}

	cfg, err := loadConfig(*path)
	if err != nil {
		var ps config.Problems
		if errors.As(err, &ps) {
			for _, p := range ps {
				fmt.Fprintln(stderr, p.String())
			}
		} else {
			fmt.Fprintf(stderr, "config: %v\n", err)
		}
		return exitConfig
	}
	if *check {
		return exitOK
	}

	log, err := newLogger(cfg.Log.Level, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "nxdnsd: %v\n", err)
		return exitFailed
	}
	defer log.Sync() //nolint:errcheck // stderr may not sync; nothing to do about it
	log.Info("nxdnsd", zap.String("version", version), zap.String("config", configName(*path)))
	// SIGUSR1 reopens the query log after logrotate has moved it.
	reopen := make(chan os.Signal, 1)
	signal.Notify(reopen, syscall.SIGUSR1)
	defer signal.Stop(reopen)
	if err := daemon.Run(ctx, cfg, log, reopen); err != nil {
		log.Error("nxdnsd failed", zap.Error(err))
		return exitFailed
	}
	return exitOK
}

// versionLine is what -version prints: the version, the commit and the Go
// toolchain with the platform, for example
//
//	nxdnsd v0.2.0-3-g1a2b3c4 (commit 1a2b3c4…, go1.26.8, linux/arm64)
func versionLine() string {
	return fmt.Sprintf("nxdnsd %s (commit %s, %s, %s/%s)",
		version, commitHash(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// commitHash is the stamped commit, else the one go build recorded from the
// version control system (with "-dirty" for a modified tree), else
// "unknown".
func commitHash() string {
	if commit != "" {
		return commit
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev == "" {
		return "unknown"
	}
	return rev + dirty
}

func loadConfig(path string) (*config.Config, error) {
	if path == "" {
		return config.LoadDefault()
	}
	return config.Load(path)
}

func configName(path string) string {
	if path == "" {
		return "(embedded default)"
	}
	return path
}

// newLogger returns zap's production JSON logger at level, writing to w
// (stderr: journald captures it under systemd).
func newLogger(level string, w io.Writer) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("log.level: %w", err)
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(w), lvl)
	return zap.New(core, zap.AddCaller(), zap.AddStacktrace(zapcore.ErrorLevel)), nil
}
