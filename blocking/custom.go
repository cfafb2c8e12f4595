package blocking

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"

	"github.com/nxdnsd/nxdnsd/blocking/rule"
)

// customRules are the rules for every client: blocking.block and
// blocking.allow from the file, and those added through /api/rules. They
// are few, so every change rebuilds their set whole. Guarded by
// Manager.mu.
type customRules struct {
	block, allow []string  // from the configuration
	api          []APIRule // added at run time, in order
	set          *set      // all of them; never nil after config
	loaded       bool      // api was read from state_dir
	loadErr      error     // why it could not be
	stateDir     string    // where api is kept; "" memory only
}

// APIRule is a custom rule as /api/rules takes and shows it.
type APIRule struct {
	Kind string `json:"kind"` // block or allow
	Rule string `json:"rule"` // one rule of a list's syntax
}

// rulesFile is where the API's rules are kept in state_dir.
func rulesFile(stateDir string) string { return filepath.Join(stateDir, "rules.json") }

// config takes the configuration's rules and state_dir, reading the
// API's rules from a state_dir it has not read yet.
func (c *customRules) config(block, allow []string, stateDir string) {
	c.block, c.allow = block, allow
	if stateDir != c.stateDir || !c.loaded {
		c.stateDir, c.loaded, c.loadErr = stateDir, true, nil
		if stateDir != "" {
			b, err := os.ReadFile(rulesFile(stateDir))
			switch {
			case errors.Is(err, os.ErrNotExist):
			case err != nil:
				c.loadErr = err
			default:
				var api []APIRule
				if err := json.Unmarshal(b, &api); err != nil {
					c.loadErr = err
				} else {
					c.api = slices.DeleteFunc(api, func(r APIRule) bool { return !validAPIRule(r) })
				}
			}
		}
	}
	c.rebuild()
}

func validAPIRule(r APIRule) bool {
	if r.Kind != "block" && r.Kind != "allow" {
		return false
	}
	_, ok := rule.One(r.Rule, r.Kind == "allow")
	return ok
}

func (c *customRules) rebuild() {
	b := newBuilder(false, len(c.block)+len(c.allow)+len(c.api))
	for _, s := range c.block {
		b.line([]byte(s))
	}
	b.allowList = true
	for _, s := range c.allow {
		b.line([]byte(s))
	}
	for _, r := range c.api {
		b.allowList = r.Kind == "allow"
		b.line([]byte(r.Rule))
	}
	c.set = b.finish()
}

// Errors of the API's rules.
var (
	ErrBadRule    = errors.New("blocking: not one rule of a list's syntax, or kind not block or allow")
	ErrNoRule     = errors.New("blocking: no such rule was added through the API")
	ErrConfigRule = errors.New("blocking: the rule is in the configuration file; remove it there")
)

// add adds r; it reports false when r was there already.
func (c *customRules) add(r APIRule) (bool, error) {
	if !validAPIRule(r) {
		return false, ErrBadRule
	}
	if slices.Contains(c.api, r) {
		return false, nil
	}
	api := append(slices.Clip(c.api), r)
	if err := c.save(api); err != nil {
		return false, err
	}
	c.api = api
	c.rebuild()
	return true, nil
}

func (c *customRules) remove(r APIRule) error {
	i := slices.Index(c.api, r)
	if i < 0 {
		if r.Kind == "block" && slices.Contains(c.block, r.Rule) || r.Kind == "allow" && slices.Contains(c.allow, r.Rule) {
			return ErrConfigRule
		}
		return ErrNoRule
	}
	api := slices.Delete(slices.Clone(c.api), i, i+1)
	if err := c.save(api); err != nil {
		return err
	}
	c.api = api
	c.rebuild()
	return nil
}

func (c *customRules) save(api []APIRule) error {
	if c.stateDir == "" {
		return nil
	}
	if api == nil {
		api = []APIRule{}
	}
	b, err := json.Marshal(api)
	if err != nil {
		return err
	}
	return writeFileAtomic(rulesFile(c.stateDir), b)
}
