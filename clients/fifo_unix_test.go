//go:build unix

package clients

import "syscall"

func mkfifoFunc(path string) error { return syscall.Mkfifo(path, 0o644) }
