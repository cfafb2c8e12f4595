//go:build unix

package safefile

import "syscall"

const openFlags = syscall.O_NONBLOCK
