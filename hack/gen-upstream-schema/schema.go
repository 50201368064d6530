package main

// This file applies the rules by which kube-derive 3.1 and schemars 1.2
// turn upstream's Rust types into a CRD's openAPIV3Schema, as far as the
// materialize.cloud types use them. kube-derive generates
// SchemaSettings::openapi3() with inline_subschemas and no meta schema,
// then the transforms AddNullable, kube's StructuralSchemaRewriter,
// OptionalEnum and OptionalIntOrString (kube-derive/src/custom_resource.rs,
// kube-core/src/schema.rs). What that gives, per Rust construct:
//
//   - a named struct deriving JsonSchema: "type": "object" with its fields as
//     properties (serde's rename_all / rename); a field is required unless it
//     is an Option or has #[serde(default)] (schemars' Deserialize contract);
//   - #[serde(default)] on a field: "default" is the field type's
//     Default::default() as serde_json writes it, left out when the field's
//     skip_serializing_if is true of it (schemars_derive field_default_expr);
//   - Option<T>: T's schema with "nullable": true, and null added to an enum
//     (schemars' allow_null, then AddNullable); a Kubernetes int-or-string
//     type gets "nullable" as a non-required property (OptionalIntOrString);
//   - String, bool: "string", "boolean"; i32 / i64: "integer" with format
//     int32 / int64; u32 / u64: format uint32 / uint64 and "minimum": 0;
//     uuid::Uuid: "string", format "uuid";
//   - Vec<T>: "array" of T; BTreeMap<String, V>: "object" with
//     additionalProperties V;
//   - an enum of unit variants: "type": "string" and "enum" of the variant
//     names (serde renames applied), undocumented variants first: schemars
//     puts documented variants in a oneOf, which the rewriter flattens after
//     the plain ones;
//   - a #[serde(transparent)] newtype: its field's schema;
//   - the root kube-derive generates: "spec" (required) and, with
//     #[kube(status = ...)], "status" as an Option; metadata is
//     #[schemars(skip)], apiVersion and kind are not fields.
//
// Kubernetes types (k8s-openapi) are described only by their top-level type:
// their subtrees come from the Kubernetes API on both sides.
//
// Anything else (another serde or schemars attribute, a type not listed
// here) fails the run, naming the struct and field: a guess could hide a
// difference.

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/materializeinc/orchestratord/hack/internal/rustsrc"
)

// k8sType is a k8s-openapi type: its top-level schema and its OpenAPI name.
type k8sType struct {
	name        string
	typ         string
	format      string
	intOrString bool
}

// k8sTypes are the k8s-openapi types upstream's CRDs hold, by Rust path,
// with the top-level schema of their JsonSchema impls (k8s-openapi 0.27,
// src/v1_34/...: "type": "object" for the structs, Quantity's
// "x-kubernetes-int-or-string": true and no type, Time a date-time string).
var k8sTypes = map[string]k8sType{
	"k8s_openapi::api::core::v1::EnvVar":                                       {name: "io.k8s.api.core.v1.EnvVar", typ: "object"},
	"k8s_openapi::api::core::v1::ResourceRequirements":                         {name: "io.k8s.api.core.v1.ResourceRequirements", typ: "object"},
	"k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition":                {name: "io.k8s.apimachinery.pkg.apis.meta.v1.Condition", typ: "object"},
	"k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta":               {name: "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", typ: "object"},
	"k8s_openapi::apimachinery::pkg::apis::meta::v1::Time":                     {name: "io.k8s.apimachinery.pkg.apis.meta.v1.Time", typ: "string", format: "date-time"},
	"k8s_openapi::apimachinery::pkg::api::resource::Quantity":                  {name: "io.k8s.apimachinery.pkg.api.resource.Quantity", intOrString: true},
	"k8s_openapi::apimachinery::pkg::util::intstr::IntOrString":                {name: "io.k8s.apimachinery.pkg.util.intstr.IntOrString", intOrString: true},
	"k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector":            {name: "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector", typ: "object"},
	"k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference":           {name: "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference", typ: "object"},
	"k8s_openapi::api::core::v1::LocalObjectReference":                         {name: "io.k8s.api.core.v1.LocalObjectReference", typ: "object"},
	"k8s_openapi::api::core::v1::Toleration":                                   {name: "io.k8s.api.core.v1.Toleration", typ: "object"},
	"k8s_openapi::api::core::v1::Affinity":                                     {name: "io.k8s.api.core.v1.Affinity", typ: "object"},
	"k8s_openapi::api::core::v1::PodSecurityContext":                           {name: "io.k8s.api.core.v1.PodSecurityContext", typ: "object"},
	"k8s_openapi::api::core::v1::SecurityContext":                              {name: "io.k8s.api.core.v1.SecurityContext", typ: "object"},
	"k8s_openapi::api::core::v1::TopologySpreadConstraint":                     {name: "io.k8s.api.core.v1.TopologySpreadConstraint", typ: "object"},
	"k8s_openapi::api::core::v1::Volume":                                       {name: "io.k8s.api.core.v1.Volume", typ: "object"},
	"k8s_openapi::api::core::v1::VolumeMount":                                  {name: "io.k8s.api.core.v1.VolumeMount", typ: "object"},
	"k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime":                {name: "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime", typ: "string", format: "date-time"},
	"k8s_openapi::apimachinery::pkg::apis::meta::v1::Duration":                 {name: "io.k8s.apimachinery.pkg.apis.meta.v1.Duration", typ: "string"},
	"k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement": {name: "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelectorRequirement", typ: "object"},
}

// node is a derived schema.
type node struct {
	typ         string
	format      string
	intOrString bool
	nullable    bool
	enum        []string // JSON values
	oneOfEnum   bool     // documented variants: schemars wrote a oneOf
	validations []string // keyword=JSON
	k8s         string
	rust        string
	props       []*prop
	items       *node
	values      *node
	item        *rustsrc.Item // the struct it comes from
}

type prop struct {
	name     string
	required bool
	def      string // JSON; "" when there is none
	n        *node
	where    string // struct.field, for messages
}

func (n *node) copy() *node {
	c := *n
	c.enum = append([]string{}, n.enum...)
	c.validations = append([]string{}, n.validations...)
	return &c
}

type intRule struct {
	format string
	min    string
	max    string
}

// ints are schemars' integer schemas (json_schema_impls/primitives.rs).
var ints = map[string]intRule{
	"i8":    {"int8", "-128", "127"},
	"i16":   {"int16", "-32768", "32767"},
	"i32":   {format: "int32"},
	"i64":   {format: "int64"},
	"i128":  {format: "int128"},
	"isize": {format: "int"},
	"u8":    {"uint8", "0", "255"},
	"u16":   {"uint16", "0", "65535"},
	"u32":   {"uint32", "0", ""},
	"u64":   {"uint64", "0", ""},
	"u128":  {"uint128", "0", ""},
	"usize": {"uint", "0", ""},
}

// schemaOf derives the schema of a Rust type seen from sc.
func (g *gen) schemaOf(t rustsrc.Type, sc scope, stack []string) (*node, error) {
	tg, err := g.resolve(t.Path, sc)
	if err != nil {
		return nil, err
	}
	switch {
	case tg.k8s != nil:
		if len(t.Args) != 0 {
			return nil, fmt.Errorf("%s: generic Kubernetes type", t.Text)
		}
		return &node{typ: tg.k8s.typ, format: tg.k8s.format, intOrString: tg.k8s.intOrString, k8s: tg.k8s.name, rust: t.Text}, nil
	case tg.it != nil:
		if len(t.Args) != 0 || tg.it.Generic {
			return nil, fmt.Errorf("%s: generic types are not modelled", t.Text)
		}
		key := tg.it.File + "#" + rustsrc.ModKey(append(append([]string{}, tg.it.Mod...), tg.it.Name))
		for _, s := range stack {
			if s == key {
				return nil, fmt.Errorf("%s: recursive types are not modelled", t.Text)
			}
		}
		g.used(tg.it.File)
		n, err := g.itemSchema(tg.it, tg.sc, append(stack, key))
		if err != nil {
			return nil, err
		}
		n.rust = t.Text
		return n, nil
	}
	arg := func(i int) (*node, error) {
		if len(t.Args) <= i {
			return nil, fmt.Errorf("%s: missing type argument", t.Text)
		}
		return g.schemaOf(t.Args[i], sc, stack)
	}
	n := &node{rust: t.Text}
	switch b := tg.builtin; {
	case b == "String" || b == "str":
		n.typ = "string"
	case b == "bool":
		n.typ = "boolean"
	case b == "Uuid":
		n.typ, n.format = "string", "uuid"
	case ints[b].format != "":
		r := ints[b]
		n.typ, n.format = "integer", r.format
		if r.min != "" {
			n.validations = append(n.validations, "minimum="+r.min)
		}
		if r.max != "" {
			n.validations = append(n.validations, "maximum="+r.max)
		}
	case b == "f32" || b == "f64":
		n.typ, n.format = "number", map[string]string{"f32": "float", "f64": "double"}[b]
	case b == "Box":
		return arg(0)
	case b == "Option":
		inner, err := arg(0)
		if err != nil {
			return nil, err
		}
		if inner.nullable {
			return nil, fmt.Errorf("%s: nested Option is not modelled", t.Text)
		}
		if inner.oneOfEnum {
			// allow_null wraps a oneOf in an anyOf with null, which kube's
			// OptionalEnum then unwraps: not modelled.
			return nil, fmt.Errorf("%s: an Option of an enum with documented variants is not modelled", t.Text)
		}
		n = inner.copy()
		n.rust = t.Text
		if n.intOrString && n.typ == "" {
			// No "type" for allow_null to extend; OptionalIntOrString marks
			// it nullable as a non-required property (see structSchema).
			return n, nil
		}
		n.nullable = true
		if len(n.enum) > 0 && !contains(n.enum, "null") {
			n.enum = append(n.enum, "null")
		}
	case b == "Vec":
		items, err := arg(0)
		if err != nil {
			return nil, err
		}
		n.typ, n.items = "array", items
	case b == "BTreeMap" || b == "HashMap":
		if len(t.Args) != 2 || t.Args[0].Text != "String" {
			return nil, fmt.Errorf("%s: only maps keyed by String are modelled", t.Text)
		}
		values, err := arg(1)
		if err != nil {
			return nil, err
		}
		n.typ, n.values = "object", values
	default:
		return nil, fmt.Errorf("%s: type %s is not modelled", t.Text, b)
	}
	return n, nil
}

func contains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

// serdeItem is one entry of #[serde(...)]: `key` or `key = "value"`.
type serdeItem struct {
	key, value string
	hasValue   bool
}

func serdeItems(a rustsrc.Attr) ([]serdeItem, error) {
	var out []serdeItem
	for _, part := range rustsrc.SplitTop(a.Args) {
		switch {
		case len(part) == 0:
		case len(part) == 1 && part[0].Kind == rustsrc.Ident:
			out = append(out, serdeItem{key: part[0].Text})
		case len(part) == 3 && part[0].Kind == rustsrc.Ident && part[1].IsPunct("=") && part[2].Kind == rustsrc.Str:
			out = append(out, serdeItem{key: part[0].Text, value: part[2].Text, hasValue: true})
		default:
			return nil, fmt.Errorf("cannot read %s", a.Rendered)
		}
	}
	return out, nil
}

// containerAttrs checks a struct's or enum's attributes and returns its
// serde container settings.
func containerAttrs(it *rustsrc.Item) (renameAll string, transparent bool, err error) {
	if !rustsrc.Derives(it.Attrs, "JsonSchema") {
		return "", false, fmt.Errorf("%s %s (%s:%d) does not derive JsonSchema", it.Kind, it.Name, it.File, it.Line)
	}
	for _, a := range it.Attrs {
		switch a.Name {
		case "doc", "derive", "allow", "kube":
			// #[kube(...)] is read by kube-derive on the spec struct (see crd).
		case "serde":
			items, err := serdeItems(a)
			if err != nil {
				return "", false, fmt.Errorf("%s: %v", it.Name, err)
			}
			for _, s := range items {
				switch {
				case s.key == "rename_all" && s.hasValue:
					renameAll = s.value
				case s.key == "transparent" && !s.hasValue:
					transparent = true
				case s.key == "rename" || s.key == "crate" || s.key == "bound":
					// The schema's name or serde's plumbing: no effect on it.
				default:
					return "", false, fmt.Errorf("%s %s: #[serde(%s)] is not modelled", it.Kind, it.Name, s.key)
				}
			}
		default:
			return "", false, fmt.Errorf("%s %s: attribute %s is not modelled", it.Kind, it.Name, a.Rendered)
		}
	}
	return renameAll, transparent, nil
}

// parseType reads a field's type: rustsrc.ParseType, less tuples, which
// the rules here do not model.
func parseType(toks []rustsrc.Token) (rustsrc.Type, error) {
	t, err := rustsrc.ParseType(toks)
	if err != nil {
		return t, err
	}
	var tuple func(t rustsrc.Type) error
	tuple = func(t rustsrc.Type) error {
		if t.Path[0] == "()" {
			return fmt.Errorf("type %s is not modelled", t.Text)
		}
		for _, a := range t.Args {
			if err := tuple(a); err != nil {
				return err
			}
		}
		return nil
	}
	return t, tuple(t)
}

func (g *gen) itemSchema(it *rustsrc.Item, sc scope, stack []string) (*node, error) {
	renameAll, transparent, err := containerAttrs(it)
	if err != nil {
		return nil, err
	}
	if it.Kind == "enum" {
		return enumSchema(it, renameAll)
	}
	switch {
	case transparent:
		if len(it.Fields) != 1 {
			return nil, fmt.Errorf("struct %s: transparent with %d fields", it.Name, len(it.Fields))
		}
		for _, a := range it.Fields[0].Attrs {
			if a.Name != "doc" {
				return nil, fmt.Errorf("struct %s: field attribute %s is not modelled", it.Name, a.Rendered)
			}
		}
		t, err := parseType(it.Fields[0].Type)
		if err != nil {
			return nil, fmt.Errorf("struct %s: %v", it.Name, err)
		}
		return g.schemaOf(t, sc, stack)
	case it.Shape != "named":
		return nil, fmt.Errorf("struct %s: a %s struct without #[serde(transparent)] is not modelled", it.Name, it.Shape)
	}
	n := &node{typ: "object", item: it}
	for _, f := range it.Fields {
		p, err := g.fieldProp(it, f, renameAll, sc, stack)
		if err != nil {
			return nil, err
		}
		if p == nil {
			continue
		}
		for _, q := range n.props {
			if q.name == p.name {
				return nil, fmt.Errorf("%s: property %s twice", p.where, p.name)
			}
		}
		n.props = append(n.props, p)
	}
	sort.Slice(n.props, func(i, j int) bool { return n.props[i].name < n.props[j].name })
	return n, nil
}

// fieldProp derives a struct field's property; nil for a field the
// Deserialize contract leaves out.
func (g *gen) fieldProp(it *rustsrc.Item, f rustsrc.Field, renameAll string, sc scope, stack []string) (*prop, error) {
	where := it.Name + "." + f.Name
	var rename, skipIf string
	var dflt, skipSer bool
	for _, a := range f.Attrs {
		switch a.Name {
		case "doc", "allow":
		case "kube":
			// A field-level #[kube(...)] (upstream's #[kube(deprecated)]) is
			// an inert helper attribute: kube-derive 3.1 reads only the
			// container's.
		case "serde":
			items, err := serdeItems(a)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", where, err)
			}
			for _, s := range items {
				switch {
				case s.key == "rename" && s.hasValue:
					rename = s.value
				case s.key == "default" && !s.hasValue:
					dflt = true
				case s.key == "skip_serializing_if" && s.hasValue:
					skipIf = s.value
				case s.key == "skip_serializing" && !s.hasValue:
					skipSer = true
				case (s.key == "skip" || s.key == "skip_deserializing") && !s.hasValue:
					return nil, nil // not in the Deserialize contract's schema
				case s.key == "alias" && s.hasValue:
					// Read by serde only.
				default:
					return nil, fmt.Errorf("%s: #[serde(%s)] is not modelled", where, s.key)
				}
			}
		default:
			return nil, fmt.Errorf("%s: attribute %s is not modelled", where, a.Rendered)
		}
	}
	name := rename
	if name == "" {
		var err error
		name, err = renameField(f.Name, renameAll)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", where, err)
		}
	}
	t, err := parseType(f.Type)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", where, err)
	}
	fn, err := g.schemaOf(t, sc, stack)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", where, err)
	}
	tg, err := g.resolve(t.Path, sc)
	if err != nil {
		return nil, err
	}
	// schemars: a field is optional when it has a default or is an Option.
	p := &prop{name: name, n: fn, where: where, required: !dflt && tg.builtin != "Option"}
	if dflt && !skipSer {
		d, err := g.defaultOf(t, sc)
		if err != nil {
			return nil, fmt.Errorf("%s: #[serde(default)]: %v", where, err)
		}
		skip := false
		if skipIf != "" {
			if skip, err = skipped(skipIf, d); err != nil {
				return nil, fmt.Errorf("%s: %v", where, err)
			}
		}
		if !skip {
			p.def = d
		}
	}
	if fn.intOrString && fn.typ == "" && !p.required {
		// kube's OptionalIntOrString.
		p.n = fn.copy()
		p.n.nullable = true
	}
	return p, nil
}

// skipped evaluates a skip_serializing_if predicate on a default value.
func skipped(pred, def string) (bool, error) {
	switch pred {
	case "Option::is_none":
		return def == "null", nil
	case "Vec::is_empty":
		return def == "[]", nil
	case "String::is_empty":
		return def == `""`, nil
	case "BTreeMap::is_empty":
		return def == "{}", nil
	}
	return false, fmt.Errorf("skip_serializing_if = %q is not modelled", pred)
}

func enumSchema(it *rustsrc.Item, renameAll string) (*node, error) {
	n := &node{typ: "string", item: it}
	var plain, documented []string
	for _, v := range it.Variants {
		if len(v.Tuple) > 0 || v.Fields {
			return nil, fmt.Errorf("enum %s: variant %s has data: not modelled", it.Name, v.Name)
		}
		name := ""
		doc := false
		for _, a := range v.Attrs {
			switch a.Name {
			case "doc":
				doc = true
			case "default":
				// std's #[default]: read by defaultOf.
			case "serde":
				items, err := serdeItems(a)
				if err != nil {
					return nil, fmt.Errorf("enum %s: %v", it.Name, err)
				}
				for _, s := range items {
					switch {
					case s.key == "rename" && s.hasValue:
						name = s.value
					case s.key == "alias" && s.hasValue:
					default:
						return nil, fmt.Errorf("enum %s variant %s: #[serde(%s)] is not modelled", it.Name, v.Name, s.key)
					}
				}
			default:
				return nil, fmt.Errorf("enum %s variant %s: attribute %s is not modelled", it.Name, v.Name, a.Rendered)
			}
		}
		if name == "" {
			var err error
			name, err = renameVariant(v.Name, renameAll)
			if err != nil {
				return nil, fmt.Errorf("enum %s: %v", it.Name, err)
			}
		}
		j := strconv.Quote(name)
		if doc {
			documented = append(documented, j)
		} else {
			plain = append(plain, j)
		}
	}
	if len(plain)+len(documented) == 0 {
		return nil, fmt.Errorf("enum %s has no variants: not modelled", it.Name)
	}
	n.enum = append(plain, documented...)
	n.oneOfEnum = len(documented) > 0
	return n, nil
}

// variantName is an enum variant as serde writes it.
func variantName(it *rustsrc.Item, v rustsrc.Variant) (string, error) {
	renameAll, _, err := containerAttrs(it)
	if err != nil {
		return "", err
	}
	for _, a := range v.Attrs {
		if a.Name != "serde" {
			continue
		}
		items, err := serdeItems(a)
		if err != nil {
			return "", err
		}
		for _, s := range items {
			if s.key == "rename" && s.hasValue {
				return s.value, nil
			}
		}
	}
	return renameVariant(v.Name, renameAll)
}

// renameField applies serde's rename_all to a snake_case field name.
func renameField(name, rule string) (string, error) {
	words := strings.Split(name, "_")
	switch rule {
	case "":
		return name, nil
	case "camelCase", "PascalCase":
		var b strings.Builder
		for i, w := range words {
			if w == "" {
				continue
			}
			if i == 0 && rule == "camelCase" {
				b.WriteString(w)
				continue
			}
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
		return b.String(), nil
	case "lowercase", "snake_case":
		return name, nil
	case "kebab-case":
		return strings.Join(words, "-"), nil
	case "SCREAMING_SNAKE_CASE":
		return strings.ToUpper(name), nil
	}
	return "", fmt.Errorf("rename_all = %q is not modelled", rule)
}

// renameVariant applies serde's rename_all to a PascalCase variant name.
func renameVariant(name, rule string) (string, error) {
	switch rule {
	case "", "PascalCase":
		return name, nil
	case "camelCase":
		r := []rune(name)
		r[0] = unicode.ToLower(r[0])
		return string(r), nil
	case "lowercase":
		return strings.ToLower(name), nil
	case "UPPERCASE":
		return strings.ToUpper(name), nil
	case "snake_case", "kebab-case", "SCREAMING_SNAKE_CASE":
		var words []string
		start := 0
		r := []rune(name)
		for i := 1; i < len(r); i++ {
			if unicode.IsUpper(r[i]) {
				words = append(words, string(r[start:i]))
				start = i
			}
		}
		words = append(words, string(r[start:]))
		sep := "_"
		if rule == "kebab-case" {
			sep = "-"
		}
		s := strings.ToLower(strings.Join(words, sep))
		if rule == "SCREAMING_SNAKE_CASE" {
			s = strings.ToUpper(s)
		}
		return s, nil
	}
	return "", fmt.Errorf("rename_all = %q is not modelled", rule)
}

// defaultOf is Default::default() of a type as serde_json writes it.
func (g *gen) defaultOf(t rustsrc.Type, sc scope) (string, error) {
	tg, err := g.resolve(t.Path, sc)
	if err != nil {
		return "", err
	}
	switch {
	case tg.k8s != nil:
		return "", fmt.Errorf("the default of %s is not modelled", t.Text)
	case tg.it != nil:
		return g.itemDefault(tg.it, tg.sc)
	}
	switch b := tg.builtin; {
	case b == "String":
		return `""`, nil
	case b == "bool":
		return "false", nil
	case b == "Uuid":
		return `"00000000-0000-0000-0000-000000000000"`, nil
	case ints[b].format != "":
		return "0", nil
	case b == "Option":
		return "null", nil
	case b == "Vec":
		return "[]", nil
	case b == "BTreeMap" || b == "HashMap":
		return "{}", nil
	case b == "Box" && len(t.Args) == 1:
		return g.defaultOf(t.Args[0], sc)
	}
	return "", fmt.Errorf("the default of %s is not modelled", t.Text)
}

// itemDefault is the default of a struct or enum: its impl Default (an
// enum variant, or a newtype of a string expression) or a derived Default
// of an enum (the #[default] variant).
func (g *gen) itemDefault(it *rustsrc.Item, sc scope) (string, error) {
	key := rustsrc.ModKey(append(append([]string{}, it.Mod...), it.Name))
	if body, ok := sc.f.Defaults[key]; ok {
		if rustsrc.Derives(it.Attrs, "Default") {
			return "", fmt.Errorf("%s both derives and implements Default", it.Name)
		}
		return g.evalDefault(it, sc, body)
	}
	if !rustsrc.Derives(it.Attrs, "Default") {
		return "", fmt.Errorf("%s has no Default", it.Name)
	}
	if it.Kind != "enum" {
		return "", fmt.Errorf("the derived Default of struct %s is not modelled", it.Name)
	}
	for _, v := range it.Variants {
		for _, a := range v.Attrs {
			if a.Name == "default" {
				name, err := variantName(it, v)
				if err != nil {
					return "", err
				}
				return strconv.Quote(name), nil
			}
		}
	}
	return "", fmt.Errorf("enum %s derives Default without a #[default] variant", it.Name)
}

func (g *gen) evalDefault(it *rustsrc.Item, sc scope, body []rustsrc.Token) (string, error) {
	bad := fmt.Errorf("impl Default for %s: cannot evaluate `%s`", it.Name, rustsrc.Render(body))
	if len(body) < 3 {
		return "", bad
	}
	self := body[0].Is(rustsrc.Ident, "Self") || body[0].Is(rustsrc.Ident, it.Name)
	if !self {
		return "", bad
	}
	if it.Kind == "enum" {
		// Self::Variant
		if len(body) != 4 || !body[1].IsPunct(":") || !body[2].IsPunct(":") || body[3].Kind != rustsrc.Ident {
			return "", bad
		}
		for _, v := range it.Variants {
			if v.Name == body[3].Text {
				name, err := variantName(it, v)
				if err != nil {
					return "", err
				}
				return strconv.Quote(name), nil
			}
		}
		return "", bad
	}
	// Self(expr) of a newtype holding a String.
	if it.Shape != "tuple" || len(it.Fields) != 1 || !body[1].IsPunct("(") {
		return "", bad
	}
	end, err := rustsrc.Matching(body, 1)
	if err != nil || end != len(body)-1 {
		return "", bad
	}
	ft, err := parseType(it.Fields[0].Type)
	if err != nil {
		return "", err
	}
	if tg, err := g.resolve(ft.Path, sc); err != nil || tg.builtin != "String" {
		return "", fmt.Errorf("impl Default for %s: only a newtype of String is modelled", it.Name)
	}
	s, err := g.evalString(body[2:end], sc)
	if err != nil {
		return "", fmt.Errorf("impl Default for %s: %v", it.Name, err)
	}
	b, _ := json.Marshal(s)
	return string(b), nil
}

// evalString evaluates a String expression: a literal or a &str constant,
// with .to_owned(), .to_string() or .into(), or String::from(...).
func (g *gen) evalString(toks []rustsrc.Token, sc scope) (string, error) {
	for _, conv := range []string{"to_owned", "to_string", "into"} {
		if n := len(toks); n >= 5 && toks[n-4].IsPunct(".") && toks[n-3].Is(rustsrc.Ident, conv) && toks[n-2].IsPunct("(") && toks[n-1].IsPunct(")") {
			return g.evalString(toks[:n-4], sc)
		}
	}
	if n := len(toks); n >= 6 && toks[0].Is(rustsrc.Ident, "String") && toks[1].IsPunct(":") && toks[2].IsPunct(":") && toks[3].Is(rustsrc.Ident, "from") && toks[4].IsPunct("(") && toks[n-1].IsPunct(")") {
		return g.evalString(toks[5:n-1], sc)
	}
	if len(toks) == 1 && toks[0].Kind == rustsrc.Str {
		return toks[0].Text, nil
	}
	if len(toks) == 1 && toks[0].Kind == rustsrc.Ident {
		for m := sc.mod; ; m = m[:len(m)-1] {
			if expr, ok := sc.f.Consts[rustsrc.ModKey(append(append([]string{}, m...), toks[0].Text))]; ok {
				return g.evalString(expr, scope{sc.f, m})
			}
			if len(m) == 0 {
				break
			}
		}
		return "", fmt.Errorf("constant %s not found in %s", toks[0].Text, sc)
	}
	return "", fmt.Errorf("cannot evaluate `%s`", rustsrc.Render(toks))
}
