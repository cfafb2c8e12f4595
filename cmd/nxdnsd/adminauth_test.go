package main

import (
	"strings"
	"testing"
)

// An admin.listen reachable from the network without a password is valid
// (DNS must keep serving after an upgrade) and -check warns about it,
// naming what the admin API will answer.
func TestCheckWarnsAdminWithoutPassword(t *testing.T) {
	p := writeConfig(t, "[admin]\nlisten = \"0.0.0.0:8053\"\n[[upstreams]]\naddress = \"udp://127.0.0.1:53\"\n")
	code, out, errs := runArgs("-c", p, "-check")
	if code != 0 || !strings.HasSuffix(out, " is valid, with 1 warning\n") {
		t.Errorf("exit %d, stdout %q; want 0 and a line saying 1 warning", code, out)
	}
	if !strings.HasPrefix(errs, "config: admin.listen: warning: ") || !strings.Contains(errs, `403 "set admin.password_hash"`) ||
		strings.Count(errs, "\n") != 1 {
		t.Errorf("stderr %q, want one line config: admin.listen: warning: … 403 \"set admin.password_hash\"", errs)
	}
}
