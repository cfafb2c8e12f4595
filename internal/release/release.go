// Package release makes nxdnsd's release artefacts reproducibly: the
// Debian version from git describe, the packaged systemd unit, the
// .tar.gz archives, the OCI image and SHA256SUMS. cmd/nxdnsrelease drives
// it (go tool task release).
//
// Reproducible means that the same commit, Go toolchain and inputs give
// the same bytes: every timestamp is the commit's time, every owner is
// root, entries are sorted, and nothing reads the clock, the user or the
// host name.
package release

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
)

// Target is one platform the release builds nxdnsd for.
type Target struct {
	Name    string // in file names: nxdnsd-VERSION-linux-NAME.tar.gz
	GOARCH  string
	GOARM   string // "" except for arm
	DebArch string // the Debian architecture of its .deb; "" for none
	Variant string // the OCI platform's variant ("v7", "v6"); with InImage
	InImage bool   // one of the OCI image's platforms
}

// Targets are the release's platforms. The armhf package carries the
// ARMv6 build: Raspberry Pi OS's 32-bit armhf runs on the ARMv6 Pi Zero and
// Pi 1, and an ARMv6 binary runs on every ARMv7 board as well. The image
// has a platform for every archive: linux/arm/v6 is the Pi Zero's and the
// Pi 1's.
var Targets = []Target{
	{Name: "amd64", GOARCH: "amd64", DebArch: "amd64", InImage: true},
	{Name: "arm64", GOARCH: "arm64", DebArch: "arm64", InImage: true},
	{Name: "armv7", GOARCH: "arm", GOARM: "7", Variant: "v7", InImage: true},
	{Name: "armv6", GOARCH: "arm", GOARM: "6", DebArch: "armhf", Variant: "v6", InImage: true},
}

// FindTargets returns the targets named in names (comma-separated), in
// the order of Targets; "" or "all" is every target.
func FindTargets(names string) ([]Target, error) {
	if names == "" || names == "all" {
		return Targets, nil
	}
	want := map[string]bool{}
	for _, n := range strings.Split(names, ",") {
		want[strings.TrimSpace(n)] = true
	}
	var ts []Target
	for _, t := range Targets {
		if want[t.Name] {
			ts = append(ts, t)
			delete(want, t.Name)
		}
	}
	if len(want) > 0 {
		var unknown []string
		for n := range want {
			unknown = append(unknown, n)
		}
		return nil, fmt.Errorf("unknown targets %q: want some of amd64, arm64, armv7, armv6", unknown)
	}
	return ts, nil
}

var (
	describeRE = regexp.MustCompile(`^v?([0-9]+\.[0-9]+\.[0-9]+)(?:-([0-9A-Za-z.]+))?(?:-([0-9]+)-g([0-9a-f]+))?$`)
	hashRE     = regexp.MustCompile(`^[0-9a-f]{4,40}$`)
)

// DebVersion turns git describe --tags --always --dirty into a Debian
// upstream version that sorts the way the commits follow each other:
//
//	v1.2.3               1.2.3
//	v1.2.3-rc1           1.2.3~rc1        (before 1.2.3)
//	v1.2.3-4-gabc1234    1.2.3+4.gabc1234 (after 1.2.3)
//	abc1234 (no tag)     0.0.0~git.N.gabc1234, N the commit count
//
// and ".dirty" after any of them for a modified work tree.
func DebVersion(describe string, commits int) (string, error) {
	d, dirty := strings.CutSuffix(describe, "-dirty")
	var v string
	if m := describeRE.FindStringSubmatch(d); m != nil {
		v = m[1]
		if m[2] != "" {
			v += "~" + m[2]
		}
		if m[3] != "" {
			v += "+" + m[3] + ".g" + m[4]
		}
	} else if hashRE.MatchString(d) {
		v = fmt.Sprintf("0.0.0~git.%d.g%s", commits, d)
	} else {
		return "", fmt.Errorf("git describe %q: want vX.Y.Z[-pre][-N-gHASH][-dirty] or a commit hash", describe)
	}
	if dirty {
		v += ".dirty"
	}
	return v, nil
}

// PackagedUnit turns deploy/nxdnsd.service (the unit for a hand install,
// running /usr/local/bin/nxdnsd) into the Debian package's: the binary is
// /usr/bin/nxdnsd, and systemd gives the service a state directory,
// /var/lib/nxdnsd, for the answer cache's file. Everything else, the
// sandboxing above all, stays as it is. It fails when the source no longer
// has what it edits, so that the two units cannot drift apart silently.
func PackagedUnit(src []byte) ([]byte, error) {
	const (
		execOld = "ExecStart=/usr/local/bin/nxdnsd "
		execNew = "ExecStart=/usr/bin/nxdnsd "
		logs    = "\nLogsDirectory=nxdnsd\n"
		state   = "\nLogsDirectory=nxdnsd\nStateDirectory=nxdnsd\n"
	)
	i := bytes.Index(src, []byte("\n[Unit]\n"))
	if i < 0 {
		return nil, fmt.Errorf("the unit has no [Unit] section")
	}
	body := string(src[i+1:])
	for _, s := range []string{execOld, logs} {
		if n := strings.Count(body, s); n != 1 {
			return nil, fmt.Errorf("the unit has %q %d times, want once", strings.TrimSpace(s), n)
		}
	}
	if strings.Contains(body, "StateDirectory=") {
		return nil, fmt.Errorf("the unit already has a StateDirectory=: update PackagedUnit")
	}
	body = strings.Replace(body, execOld, execNew, 1)
	body = strings.Replace(body, logs, state, 1)
	if strings.Contains(body, "/usr/local/") {
		return nil, fmt.Errorf("the packaged unit still names /usr/local/")
	}
	head := `# systemd unit for nxdnsd, as the Debian package installs it: the binary is
# /usr/bin/nxdnsd, the configuration /etc/nxdnsd/nxdns.toml (a conffile),
# the state directory /var/lib/nxdnsd. Made from deploy/nxdnsd.service by
# the release. To change a setting, do not edit this file (an upgrade
# replaces it): systemctl edit nxdnsd
# Logs go to journald: journalctl -u nxdnsd -o cat | jq
`
	return []byte(head + body), nil
}
