// Package netnstest runs a test in a network namespace of its own, with
// nothing but its loopback: the test binary runs again, for that test
// alone, inside a new namespace. Tests that need no route out (the
// network-down state, the embedded default), or that send datagrams to
// random ports, use it so that nothing leaves the machine and nothing
// reaches another test's sockets.
package netnstest

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// netnsEnv marks the test binary run by InOwn, inside its network
// namespace.
const netnsEnv = "NXDNSD_TEST_NETNS"

// InOwn reports whether the calling test runs in a network namespace
// of its own, with nothing but its loopback. The first time, it runs the
// test binary again, for this test alone, in a new namespace (a user
// namespace too when not root), relays its output, fails t if it failed,
// and returns false: the caller returns. In that run it brings lo up and
// returns true. Where namespaces
// cannot be made it returns false after skipping t.
func InOwn(t *testing.T) bool {
	t.Helper()
	if os.Getenv(netnsEnv) == t.Name() {
		if err := loopbackUp(); err != nil {
			t.Fatalf("bringing lo up in the test's network namespace: %v", err)
		}
		return true
	}
	args := []string{"-test.run=^" + t.Name() + "$", "-test.count=1", "-test.v"}
	if testing.Short() {
		args = append(args, "-test.short")
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], args...)
	cmd.Env = append(os.Environ(), netnsEnv+"="+t.Name())
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	if os.Geteuid() != 0 {
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Skipf("prerequisite missing: a network namespace of its own for this test (root, or user namespaces): %v", err)
		return false
	}
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		t.Log(line)
	}
	if err != nil {
		t.Errorf("the test in its own network namespace: %v", err)
	}
	return false
}

// loopbackUp sets lo up: a new network namespace has it down.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}
