// Package admintest checks admin API responses against openapi.yaml, the
// description of the API at the repository root, so that tests of the
// admin package and end-to-end tests of the daemon hold the live server to
// the published schema.
//
// It is an ordinary package so that every package's tests can import it;
// production code never does.
package admintest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// OpenAPIPath returns the path of openapi.yaml, found from this source
// file's place in the repository: tests run from their package directory,
// which says nothing about where the root is.
func OpenAPIPath() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "openapi.yaml")
}

// CheckHealth reports whether body, sent with HTTP status code by
// GET /api/health, is what openapi.yaml documents for that status: the
// code must be one of the operation's responses, and the body must
// validate against that response's application/json schema (formats such
// as date-time asserted).
func CheckHealth(code int, body []byte) error { return Check("/api/health", code, body) }

// RequireHealth fails tb unless CheckHealth accepts the response.
func RequireHealth(tb testing.TB, code int, body []byte) {
	tb.Helper()
	Require(tb, "/api/health", code, body)
}

// Check reports whether body, sent with HTTP status code by GET path (a
// path of openapi.yaml, without its query), is what openapi.yaml
// documents for that status, as CheckHealth does for /api/health.
func Check(path string, code int, body []byte) error {
	ptr := "/paths/" + strings.ReplaceAll(path, "/", "~1") + "/get/responses/" + strconv.Itoa(code) + "/content/application~1json/schema"
	sch, err := compile(ptr)
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("the body is not JSON: %w", err)
	}
	if err := sch.Validate(inst); err != nil {
		return fmt.Errorf("the %d body of %s does not match openapi.yaml: %w", code, path, err)
	}
	return nil
}

// Require fails tb unless Check accepts the response.
func Require(tb testing.TB, path string, code int, body []byte) {
	tb.Helper()
	if err := Check(path, code, body); err != nil {
		tb.Fatalf("%v\nbody: %s", err, body)
	}
}

// compile loads openapi.yaml and compiles the schema at the JSON pointer
// ptr within it. The YAML goes through encoding/json so that the validator
// sees exactly the values a JSON document would give it.
func compile(ptr string) (*jsonschema.Schema, error) {
	path := OpenAPIPath()
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc any
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	js, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("%s: not representable as JSON: %w", path, err)
	}
	root, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		return nil, err
	}
	const url = "https://nxdnsd.invalid/openapi.json"
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020) // the dialect OpenAPI 3.1 builds on
	c.AssertFormat()
	if err := c.AddResource(url, root); err != nil {
		return nil, err
	}
	sch, err := c.Compile(url + "#" + ptr)
	if err != nil {
		return nil, fmt.Errorf("openapi.yaml has no usable schema at %s: %w", ptr, err)
	}
	return sch, nil
}
