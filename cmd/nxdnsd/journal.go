package main

import (
	"io"
	"os"
	"strconv"
	"strings"

	"go.uber.org/zap/buffer"
	"go.uber.org/zap/zapcore"
)

// toJournal reports whether w is the stream systemd connected to journald
// for this service. systemd names that stream in $JOURNAL_STREAM as
// "DEVICE:INODE" (systemd.exec(5)); a process that merely inherited the
// variable, with its stderr sent elsewhere, must not prefix its lines, so
// the stream's identity is compared with stderr's.
func toJournal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && sameStream(f, os.Getenv("JOURNAL_STREAM"))
}

// parseStream parses $JOURNAL_STREAM's "DEVICE:INODE".
func parseStream(env string) (dev, ino uint64, ok bool) {
	d, i, found := strings.Cut(env, ":")
	if !found {
		return 0, 0, false
	}
	dev, err1 := strconv.ParseUint(d, 10, 64)
	ino, err2 := strconv.ParseUint(i, 10, 64)
	return dev, ino, err1 == nil && err2 == nil
}

// priorityEncoder starts every line with its syslog priority in angle
// brackets, as journald reads a stream line's own priority
// (SyslogLevelPrefix=, on by default): journalctl -p warning then finds
// the warnings. The JSON after it is unchanged.
type priorityEncoder struct{ zapcore.Encoder }

var lines = buffer.NewPool()

// Clone implements zapcore.Encoder.
func (e priorityEncoder) Clone() zapcore.Encoder { return priorityEncoder{e.Encoder.Clone()} }

// EncodeEntry implements zapcore.Encoder.
func (e priorityEncoder) EncodeEntry(ent zapcore.Entry, fields []zapcore.Field) (*buffer.Buffer, error) {
	b, err := e.Encoder.EncodeEntry(ent, fields)
	if err != nil {
		return b, err
	}
	out := lines.Get()
	out.AppendString(syslogPriority(ent.Level))
	_, _ = out.Write(b.Bytes())
	b.Free()
	return out, nil
}

// syslogPriority is the prefix of a line at level: <3> error, <4>
// warning, <6> info, <7> debug, and <2> (critical) for the levels that end
// the process or should.
func syslogPriority(l zapcore.Level) string {
	switch {
	case l <= zapcore.DebugLevel:
		return "<7>"
	case l == zapcore.InfoLevel:
		return "<6>"
	case l == zapcore.WarnLevel:
		return "<4>"
	case l == zapcore.ErrorLevel:
		return "<3>"
	default: // DPanic, Panic, Fatal
		return "<2>"
	}
}
