package environmentd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	mzenv "github.com/materializeinc/orchestratord/pkg/environmentd"
)

// The listeners file as environmentd parses it (upstream
// src/server-core/src/listeners.rs, serde_json): fields are required unless
// marked default there, unknown fields are ignored, enums must be one of
// their variants, and a version reads only its own schema — environmentd
// ignores the "version" tag and parses the schema its binary knows, so a
// file in the other schema fails with a structural error.

// RouteGroup is one group of HTTP routes of a listener; AllowedRoles is
// empty when the group is disabled.
type RouteGroup struct {
	Enabled      bool
	AllowedRoles string
}

// Listener is one SQL or HTTP listener; Routes is nil for SQL listeners.
type Listener struct {
	Name              string
	Addr              netip.AddrPort
	AuthenticatorKind string
	EnableTLS         bool
	// AllowedRoles is the SQL listener's (HTTP listeners carry it per
	// route group).
	AllowedRoles string
	Routes       map[string]RouteGroup
}

// Listeners is a parsed listeners file.
type Listeners struct {
	SQL, HTTP []Listener
}

// Schema versions of the listeners file.
const (
	Schema147  = "0.147.0"
	Schema2632 = "26.32.0"
)

var (
	authenticatorKinds = []string{"Frontegg", "Password", "Sasl", "Oidc", "None"}
	allowedRoles       = []string{"Normal", "Internal", "NormalAndInternal"}
	routeGroups        = []string{"base", "webhook", "internal", "metrics", "profiling", "mcp_agent", "mcp_developer", "console_config"}
	// In the 0.147.0 schema these groups are #[serde(default)].
	defaultedRoutes147 = map[string]bool{"mcp_agent": true, "mcp_developer": true, "console_config": true}
)

// ParseListeners parses raw in schema ("0.147.0" or "26.32.0") and runs
// environmentd's listener validation. Messages follow serde_json's
// ("missing field `routes`").
func ParseListeners(raw []byte, schema string) (*Listeners, error) {
	var top map[string]json.RawMessage
	if err := decodeStrict(raw, &top, "the listeners file"); err != nil {
		return nil, err
	}
	if v, ok := top["version"]; ok {
		// Stricter than environmentd, which ignores the tag: a tag that
		// disagrees with the schema means the operator picked the wrong one.
		var declared string
		if err := json.Unmarshal(v, &declared); err != nil || declared != schema {
			return nil, fmt.Errorf("listeners file declares version %s, but this environmentd parses the %s schema", v, schema)
		}
	}
	out := &Listeners{}
	for _, kind := range []string{"sql", "http"} {
		rawMap, ok := top[kind]
		if !ok {
			return nil, fmt.Errorf("missing field `%s`", kind)
		}
		var byName map[string]json.RawMessage
		if err := decodeStrict(rawMap, &byName, "field `"+kind+"`"); err != nil {
			return nil, err
		}
		for _, name := range sortedNames(byName) {
			l, err := parseListener(byName[name], kind == "http", schema)
			if err != nil {
				return nil, fmt.Errorf("%s listener %q: %w", kind, name, err)
			}
			l.Name = name
			if kind == "http" {
				if l.AuthenticatorKind == "Sasl" {
					return nil, fmt.Errorf("invalid HTTP listener: SASL authentication is not supported for HTTP listeners")
				}
				out.HTTP = append(out.HTTP, l)
			} else {
				out.SQL = append(out.SQL, l)
			}
		}
	}
	return out, nil
}

func parseListener(raw json.RawMessage, http bool, schema string) (Listener, error) {
	var l Listener
	var f map[string]json.RawMessage
	if err := decodeStrict(raw, &f, "listener"); err != nil {
		return l, err
	}
	var addr string
	if err := field(f, "addr", &addr); err != nil {
		return l, err
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return l, fmt.Errorf("invalid socket address syntax: %q", addr)
	}
	l.Addr = ap
	if err := enumField(f, "authenticator_kind", authenticatorKinds, &l.AuthenticatorKind); err != nil {
		return l, err
	}
	if err := field(f, "enable_tls", &l.EnableTLS); err != nil {
		return l, err
	}
	// SQL listeners and 0.147.0 HTTP listeners carry one allowed_roles;
	// 26.32.0 HTTP listeners carry it per route group.
	if !http || schema == Schema147 {
		if err := enumField(f, "allowed_roles", allowedRoles, &l.AllowedRoles); err != nil {
			return l, err
		}
	}
	if !http {
		return l, nil
	}
	rawRoutes, ok := f["routes"]
	if !ok {
		return l, fmt.Errorf("missing field `routes`")
	}
	var routes map[string]json.RawMessage
	if err := decodeStrict(rawRoutes, &routes, "field `routes`"); err != nil {
		return l, err
	}
	l.Routes = map[string]RouteGroup{}
	for _, g := range routeGroups {
		rawGroup, ok := routes[g]
		if !ok {
			if schema == Schema147 && defaultedRoutes147[g] {
				l.Routes[g] = RouteGroup{}
				continue
			}
			return l, fmt.Errorf("missing field `%s`", g)
		}
		if schema == Schema147 {
			var on bool
			if err := json.Unmarshal(rawGroup, &on); err != nil {
				return l, fmt.Errorf("routes.%s: invalid type: %s, expected a boolean", g, kindOf(rawGroup))
			}
			l.Routes[g] = RouteGroup{Enabled: on}
			if on {
				l.Routes[g] = RouteGroup{Enabled: true, AllowedRoles: l.AllowedRoles}
			}
			continue
		}
		var group map[string]json.RawMessage
		if err := decodeStrict(rawGroup, &group, "routes."+g); err != nil {
			return l, fmt.Errorf("routes.%s: invalid type: %s, expected struct SerializedRouteGroup", g, kindOf(rawGroup))
		}
		var rg RouteGroup
		if err := field(group, "enabled", &rg.Enabled); err != nil {
			return l, fmt.Errorf("routes.%s: %w", g, err)
		}
		if _, has := group["allowed_roles"]; has {
			if err := enumField(group, "allowed_roles", allowedRoles, &rg.AllowedRoles); err != nil {
				return l, fmt.Errorf("routes.%s: %w", g, err)
			}
		}
		if rg.Enabled && rg.AllowedRoles == "" {
			return l, fmt.Errorf("routes.%s: an enabled route group requires `allowed_roles`", g)
		}
		if !rg.Enabled {
			rg.AllowedRoles = "" // ignored when disabled
		}
		l.Routes[g] = rg
	}
	return l, nil
}

func decodeStrict(raw []byte, v any, what string) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("%s: %v", what, err)
	}
	if v, ok := v.(*map[string]json.RawMessage); ok && *v == nil {
		return fmt.Errorf("%s: invalid type: null, expected a map", what)
	}
	if d.More() {
		return fmt.Errorf("%s: trailing characters", what)
	}
	return nil
}

func field(f map[string]json.RawMessage, name string, v any) error {
	raw, ok := f[name]
	if !ok {
		return fmt.Errorf("missing field `%s`", name)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%s: invalid type: %s", name, kindOf(raw))
	}
	return nil
}

func enumField(f map[string]json.RawMessage, name string, variants []string, v *string) error {
	if err := field(f, name, v); err != nil {
		return err
	}
	for _, want := range variants {
		if *v == want {
			return nil
		}
	}
	return fmt.Errorf("%s: unknown variant `%s`, expected one of `%s`", name, *v, strings.Join(variants, "`, `"))
}

func kindOf(raw json.RawMessage) string {
	switch t := strings.TrimSpace(string(raw)); {
	case t == "null":
		return "null"
	case t == "true" || t == "false":
		return "boolean `" + t + "`"
	case strings.HasPrefix(t, "\""):
		return "string " + t
	case strings.HasPrefix(t, "{"):
		return "map"
	case strings.HasPrefix(t, "["):
		return "sequence"
	default:
		return "number " + t
	}
}

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// internalUsers are environmentd's internal users (upstream
// INTERNAL_USER_NAMES).
var internalUsers = map[string]bool{mzenv.SystemUser: true, supportUser: true, "mz_analytics": true}

// supportUser is environmentd's support user (upstream SUPPORT_USER_NAME).
const supportUser = "mz_support"

// reservedRoleName is upstream's is_reserved_role_name: the builtin prefixes
// (mz_, pg_, external_), PUBLIC in any case, and the role specification
// keywords as written lower-case.
func reservedRoleName(name string) bool {
	switch name {
	case "current_user", "current_role", "session_user", "user", "none":
		return true
	}
	if strings.EqualFold(name, "public") {
		return true
	}
	return strings.HasPrefix(name, "mz_") || strings.HasPrefix(name, "pg_") || strings.HasPrefix(name, "external_")
}

// Allows reports whether roles (a route group's or a SQL listener's
// allowed_roles) admit user, as upstream's check_role_allowed: Normal is
// every name that is not reserved, Internal the internal users.
func Allows(roles, user string) bool {
	switch roles {
	case "NormalAndInternal":
		return !reservedRoleName(user) || internalUsers[user]
	case "Internal":
		return internalUsers[user]
	case "Normal":
		return !reservedRoleName(user)
	}
	return false
}
