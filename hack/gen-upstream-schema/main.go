// Command gen-upstream-schema reads the Rust types of upstream Materialize's
// custom resources (src/cloud-resources/src/crd*.rs and the types they use)
// and writes the facts of the CRD schemas kube-derive and schemars derive
// from them: per CRD version and field path, the JSON type, format,
// required, nullable, default, enum values and validation keywords. The
// test in test/upstream (schema_parity_test.go) compares them with this
// project's CRDs (pkg/crds).
//
//	go run ./hack/gen-upstream-schema -upstream DIR [-commit SHA] [-out FILE]
//
// DIR is a Materialize checkout or bare repository (read with git at
// -commit, default HEAD) or an extracted source tree (then -commit is
// required and only labels the output). Nothing of upstream is built or
// run: the rules kube-derive and schemars apply are restated in schema.go,
// for the crate versions listed in modelledCrates (checked against
// upstream's Cargo.lock). Anything the generator does not understand fails
// the run. Where upstream has the generated CRD of a type in its tree
// (the VpcEndpoint CRD's JSON, the Materialize field tables of its docs)
// the derived facts are checked against it.
//
// The generator needs an upstream checkout, which CI does not have: the
// facts are committed, and the test runs from them.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/materializeinc/orchestratord/hack/internal/rustsrc"
)

func main() {
	upstreamDir := flag.String("upstream", "", "Materialize checkout, bare repository or source tree (required)")
	commit := flag.String("commit", "", "commit to read (git) or to name in the header (source tree)")
	name := flag.String("upstream-name", "github.com/MaterializeInc/materialize", "repository named in the generated header")
	out := flag.String("out", "test/upstream/schema_facts.go", "output file")
	flag.Parse()
	if *upstreamDir == "" || flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*upstreamDir, *commit, *name, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gen-upstream-schema:", err)
		os.Exit(1)
	}
}

func run(dir, commit, name, out string) error {
	up, err := rustsrc.Open(dir, commit)
	if err != nil {
		return err
	}
	if up.Commit != "" {
		commit = up.Commit
	}
	src, err := generate(up, name, commit)
	if err != nil {
		return err
	}
	return os.WriteFile(out, src, 0o644)
}

// generate derives the facts and renders them as Go source.
func generate(up *rustsrc.Source, name, commit string) ([]byte, error) {
	versions, err := checkCrates(up)
	if err != nil {
		return nil, err
	}
	g := &gen{up: up}
	crds, err := g.crds()
	if err != nil {
		return nil, err
	}
	checked, err := crossCheck(up, crds)
	if err != nil {
		return nil, err
	}
	return emit(crds, name, commit, versions, g.sources, checked)
}
