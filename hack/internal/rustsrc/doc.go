// Package rustsrc reads upstream Materialize's Rust sources for the code
// generators under hack/ (gen-standin-args, gen-upstream-schema), without
// building anything: the files of a checkout, bare repository or source
// tree at a commit (Source), Rust's tokens (Lex), enough of its grammar to
// find struct and enum definitions, consts, impls and use declarations
// (ParseFile, ParseItem) and to read types (ParseType), and Cargo's
// manifests and lock file (Source.Manifest, Source.Locked). What the
// definitions mean (to clap, to schemars) is each generator's own.
package rustsrc
