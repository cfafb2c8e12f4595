package config

import (
	"fmt"

	"github.com/nxdnsd/nxdnsd/admin/auth"
)

// adminAuth checks admin.password_hash and [[admin.tokens]] (spec section
// 13). A hash's problem never quotes it: a password pasted where its hash
// belongs must not reach the terminal or the journal.
func (ck *checker) adminAuth(a Admin) {
	if a.PasswordHash != "" {
		if err := auth.CheckHash(a.PasswordHash); err != nil {
			ck.add("admin.password_hash", "%v (\"\" for no password)", err)
		}
	}
	names := make(firsts[string], len(a.Tokens))
	for i, t := range a.Tokens {
		p := fmt.Sprintf("admin.tokens[%d]", i)
		if t.Name == "" {
			ck.add(p+".name", "is required")
		} else if j, dup := names.add(t.Name, i); dup {
			ck.add(p+".name", "duplicate name %q (also admin.tokens[%d].name)", t.Name, j)
		}
		if t.Hash == "" {
			ck.add(p+".hash", "is required: the hash `nxdnsd -hash-password` prints for the token")
		} else if err := auth.CheckHash(t.Hash); err != nil {
			ck.add(p+".hash", "%v", err)
		}
		switch auth.Role(t.Role) {
		case auth.RoleRead, auth.RoleAdmin:
		case "":
			ck.add(p+".role", "is required: read (GET only) or admin (everything)")
		default:
			ck.add(p+".role", "%q is not read or admin", t.Role)
		}
	}
}

// adminAuthWarnings says what the admin API will refuse as written: a
// listener reachable from the network without a password serves only the
// metrics and the probes (DNS is served as usual: an upgrade must not take
// a network's DNS down), and tokens are not checked without a password.
func (c *Config) adminAuthWarnings() Problems {
	if c.Admin.Listen == "" || c.Admin.PasswordHash != "" {
		return nil
	}
	var ws Problems
	if !auth.Loopback(c.Admin.Listen) {
		ws = append(ws, Problem{Path: "admin.listen", Message: oneLine(warningPrefix + fmt.Sprintf(
			"%q is not a loopback address and admin.password_hash is not set: the admin API serves only "+
				"/metrics, /livez and /readyz, and answers the rest 403 \"set admin.password_hash\" "+
				"(DNS is served as usual; run nxdnsd -hash-password to make one)", c.Admin.Listen))})
	}
	if len(c.Admin.Tokens) > 0 {
		ws = append(ws, Problem{Path: "admin.tokens", Message: warningPrefix +
			"tokens are checked only when admin.password_hash is set: until then they are ignored"})
	}
	return ws
}

// AuthToken is the token as package auth takes it.
func (t AdminToken) AuthToken() auth.Token {
	return auth.Token{Name: t.Name, Hash: t.Hash, Role: auth.Role(t.Role)}
}
