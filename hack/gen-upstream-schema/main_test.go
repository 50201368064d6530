package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/materializeinc/orchestratord/hack/internal/rustsrc"
	"github.com/materializeinc/orchestratord/hack/internal/rustsrc/rustsrctest"
)

const fixtureLock = `
[[package]]
name = "k8s-openapi"
version = "0.27.0"

[[package]]
name = "kube-core"
version = "3.1.0"

[[package]]
name = "kube-derive"
version = "3.1.0"

[[package]]
name = "mz-cloud-resources"
version = "0.0.0"
dependencies = [
 "k8s-openapi",
 "schemars 1.2.1",
]

[[package]]
name = "schemars"
version = "0.9.0"

[[package]]
name = "schemars"
version = "1.2.1"

[[package]]
name = "schemars_derive"
version = "1.2.1"
`

const fixtureCrd = `
//! Shared types.
use std::collections::BTreeMap;

pub mod widget;

/// A shared struct, reached through crate::crd.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SharedSpec {
    pub host_names: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra: Option<BTreeMap<String, String>>,
}
`

const fixtureWidget = `
use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::ResourceRequirements,
    apimachinery::pkg::{api::resource::Quantity, apis::meta::v1::Condition},
};
use kube::CustomResource;
use mz_other::Mode;
use uuid::Uuid;

use crate::crd::SharedSpec;

pub const DEFAULT_TIMEOUT: &str = "1h";

/** A transparent newtype with a hand-written Default. */
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(transparent)]
pub struct Timeout(pub String);

impl Default for Timeout {
    fn default() -> Self {
        Timeout(DEFAULT_TIMEOUT.to_owned())
    }
}

pub mod v1 {
    use super::*;

    #[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    pub enum Color {
        DarkRed,
        #[default]
        LightBlue,
        #[serde(rename = "GREEN")]
        Green,
    }

    #[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
    pub enum Strategy {
        /// Documented: listed after the plain variants.
        Careful,
        Quick,
        /// Documented too.
        #[default]
        Balanced,
    }

    #[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    #[kube(
        namespaced,
        group = "materialize.cloud",
        version = "v1",
        kind = "Widget",
        plural = "widgets",
        status = "WidgetStatus",
        printcolumn = r#"{"name": "X", "type": "string", "jsonPath": ".spec.imageRef"}"#
    )]
    pub struct WidgetSpec {
        /// Required: neither an Option nor defaulted.
        pub image_ref: String,
        pub replicas: Option<i32>,
        #[kube(deprecated)]
        #[serde(default)]
        pub enabled: bool,
        #[serde(default)]
        pub id: Uuid,
        #[serde(default)]
        pub color: Color,
        #[serde(default)]
        pub strategy: Strategy,
        pub maybe_color: Option<Color>,
        #[serde(default)]
        pub timeout: Timeout,
        #[serde(rename = "renamedField")]
        pub some_field: Option<i64>,
        #[serde(skip)]
        pub internal: String,
        pub scratch: Option<Quantity>,
        pub resources: Option<ResourceRequirements>,
        pub labels: Option<BTreeMap<String, String>>,
        pub shared: SharedSpec,
        pub mode: Mode,
        #[serde(default)]
        pub note: String,
    }

    #[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    pub struct WidgetStatus {
        pub generation: u64,
        pub conditions: Vec<Condition>,
    }
}
`

const fixtureOther = `
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Fast,
    Slow,
}
`

// writeFixture lays out a source tree with Cargo.lock and the crates the
// fixture names, replacing files as given.
func writeFixture(t *testing.T, files map[string]string) string {
	t.Helper()
	all := map[string]string{
		"Cargo.lock":                            fixtureLock,
		"src/cloud-resources/Cargo.toml":        "[package]\nname = \"mz-cloud-resources\"\n",
		"src/cloud-resources/src/lib.rs":        "pub mod crd;\n",
		"src/cloud-resources/src/crd.rs":        fixtureCrd,
		"src/cloud-resources/src/crd/widget.rs": fixtureWidget,
		"src/other/Cargo.toml":                  "[package]\nname = \"mz-other\"\nversion = \"0.0.0\"\n",
		"src/other/src/lib.rs":                  "pub use modes::Mode;\nmod modes;\n",
		"src/other/src/modes.rs":                fixtureOther,
	}
	for k, v := range files {
		all[k] = v
	}
	return rustsrctest.Tree(t, all)
}

func deriveFixture(t *testing.T, files map[string]string) ([]*crd, error) {
	t.Helper()
	up, err := rustsrc.Open(writeFixture(t, files), "fixture")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checkCrates(up); err != nil {
		return nil, err
	}
	g := &gen{up: up}
	return g.crds()
}

func TestSchemaRulesOnFixture(t *testing.T) {
	crds, err := deriveFixture(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(crds) != 1 || crds[0].name != "widgets.materialize.cloud" || crds[0].version != "v1" {
		t.Fatalf("crds %+v", crds)
	}
	got := map[string]string{}
	for _, f := range flatten(crds[0].root) {
		f.rust = ""
		got[f.path] = describe(f)
	}
	want := map[string]fact{
		".":                        {typ: "object"},
		".spec":                    {typ: "object", required: true},
		".spec.imageRef":           {typ: "string", required: true},
		".spec.replicas":           {typ: "integer", format: "int32", nullable: true},
		".spec.enabled":            {typ: "boolean", def: "false"},
		".spec.id":                 {typ: "string", format: "uuid", def: `"00000000-0000-0000-0000-000000000000"`},
		".spec.color":              {typ: "string", def: `"lightBlue"`, enum: []string{`"darkRed"`, `"lightBlue"`, `"GREEN"`}},
		".spec.strategy":           {typ: "string", def: `"Balanced"`, enum: []string{`"Quick"`, `"Careful"`, `"Balanced"`}},
		".spec.maybeColor":         {typ: "string", nullable: true, enum: []string{`"darkRed"`, `"lightBlue"`, `"GREEN"`, "null"}},
		".spec.timeout":            {typ: "string", def: `"1h"`},
		".spec.renamedField":       {typ: "integer", format: "int64", nullable: true},
		".spec.scratch":            {intOrString: true, nullable: true, k8s: "io.k8s.apimachinery.pkg.api.resource.Quantity"},
		".spec.resources":          {typ: "object", nullable: true, k8s: "io.k8s.api.core.v1.ResourceRequirements"},
		".spec.labels":             {typ: "object", nullable: true},
		".spec.labels{}":           {typ: "string"},
		".spec.shared":             {typ: "object", required: true},
		".spec.shared.hostNames":   {typ: "array", nullable: true},
		".spec.shared.hostNames[]": {typ: "string"},
		".spec.shared.extra":       {typ: "object", nullable: true},
		".spec.shared.extra{}":     {typ: "string"},
		".spec.mode":               {typ: "string", required: true, enum: []string{`"fast"`, `"slow"`}},
		".spec.note":               {typ: "string", def: `""`},
		".status":                  {typ: "object", nullable: true},
		".status.generation":       {typ: "integer", format: "uint64", required: true, validations: []string{"minimum=0"}},
		".status.conditions":       {typ: "array", required: true},
		".status.conditions[]":     {typ: "object", k8s: "io.k8s.apimachinery.pkg.apis.meta.v1.Condition"},
	}
	for p, w := range want {
		w.path = p
		if got[p] != describe(w) {
			t.Errorf("%s:\n\tgot  %s\n\twant %s", p, got[p], describe(w))
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("unexpected node %s: %s", p, got[p])
		}
	}
}

func TestSchemaRulesRefuseWhatIsNotModelled(t *testing.T) {
	for _, c := range []struct {
		name, old, new, want string
	}{
		{"flatten", "#[serde(rename = \"renamedField\")]", "#[serde(flatten)]", "WidgetSpec.some_field: #[serde(flatten)] is not modelled"},
		{"schemars attribute", "#[serde(skip)]", "#[schemars(skip)]", "WidgetSpec.internal: attribute #[schemars(skip)] is not modelled"},
		{"container default", "#[serde(rename_all = \"camelCase\")]\n    pub struct WidgetStatus", "#[serde(rename_all = \"camelCase\", default)]\n    pub struct WidgetStatus", "struct WidgetStatus: #[serde(default)] is not modelled"},
		{"unknown type", "pub note: String,", "pub note: std::time::Duration,", "std::time::Duration is not modelled"},
		{"CEL rule", "plural = \"widgets\",", "plural = \"widgets\", validation = \"self.x\",", "#[kube(validation)] is not modelled"},
		{"data variant", "Fast,", "Fast(u8),", "variant Fast has data"},
		{"no Default", "#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]\n    #[serde(rename_all = \"camelCase\")]\n    pub enum Color", "#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]\n    #[serde(rename_all = \"camelCase\")]\n    pub enum Color", "Color has no Default"},
	} {
		t.Run(c.name, func(t *testing.T) {
			files := map[string]string{}
			for p, src := range map[string]string{"src/cloud-resources/src/crd/widget.rs": fixtureWidget, "src/other/src/modes.rs": fixtureOther} {
				if strings.Contains(src, c.old) {
					files[p] = strings.Replace(src, c.old, c.new, 1)
				}
			}
			if len(files) == 0 {
				t.Fatalf("fixture has no %q", c.old)
			}
			_, err := deriveFixture(t, files)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got error %v, want one containing %q", err, c.want)
			}
		})
	}
}

func TestSchemaRulesRefuseAnotherCrateVersion(t *testing.T) {
	_, err := deriveFixture(t, map[string]string{"Cargo.lock": strings.Replace(fixtureLock, "version = \"3.1.0\"", "version = \"4.0.0\"", 1)})
	if err == nil || !strings.Contains(err.Error(), "upstream locks kube-core 4.0.0") {
		t.Fatalf("got %v", err)
	}
}

// With MATERIALIZE_UPSTREAM set to a Materialize checkout at the commit
// the committed facts name, the generator must reproduce them.
func TestSchemaFactsUpToDate(t *testing.T) {
	dir := os.Getenv("MATERIALIZE_UPSTREAM")
	if dir == "" {
		t.Skip("MATERIALIZE_UPSTREAM (a Materialize checkout) is not set")
	}
	committed, err := os.ReadFile("../../test/upstream/schema_facts.go")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(` at ([0-9a-f]{40})\. DO NOT EDIT`).FindStringSubmatch(string(committed))
	if m == nil {
		t.Fatal("schema_facts.go names no commit")
	}
	commit := m[1]
	up, err := rustsrc.Open(dir, commit)
	if err != nil {
		t.Fatal(err)
	}
	src, err := generate(up, "github.com/MaterializeInc/materialize", up.Commit)
	if err != nil {
		t.Fatal(err)
	}
	if string(src) != string(committed) {
		t.Errorf("test/upstream/schema_facts.go is not what the generator writes for %s: run go run ./hack/gen-upstream-schema -upstream %s -commit %s", commit, dir, commit)
	}
}
