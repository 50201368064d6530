package materialize

import (
	"encoding/json"
	"fmt"

	"github.com/materializeinc/orchestratord/pkg/apis/materialize/v1alpha1"
	"github.com/materializeinc/orchestratord/pkg/imageref"
)

// The listeners file environmentd reads from --listeners-config-path, in the
// two schemas of upstream's src/server-core/src/listeners.rs. Field order is
// the Rust structs' declaration order, so the JSON is byte for byte what
// upstream writes (serde keeps declaration order; maps are sorted).

// perRouteGroupRolesVersion is the first environmentd that parses the
// 26.32.0 schema; older ones parse the 0.147.0 schema.
var perRouteGroupRolesVersion = imageref.MustParseVersion("26.32.0-dev.0")

const (
	rolesNormal            = "Normal"
	rolesInternal          = "Internal"
	rolesNormalAndInternal = "NormalAndInternal"
)

type sqlListener struct {
	Addr              string `json:"addr"`
	AuthenticatorKind string `json:"authenticator_kind"`
	AllowedRoles      string `json:"allowed_roles"`
	EnableTLS         bool   `json:"enable_tls"`
}

// routes147 is v0_147_0::HttpRoutes: one bool per route group.
type routes147 struct {
	Base          bool `json:"base"`
	Webhook       bool `json:"webhook"`
	Internal      bool `json:"internal"`
	Metrics       bool `json:"metrics"`
	Profiling     bool `json:"profiling"`
	MCPAgent      bool `json:"mcp_agent"`
	MCPDeveloper  bool `json:"mcp_developer"`
	ConsoleConfig bool `json:"console_config"`
}

// httpListener147 is v0_147_0::HttpListenerConfig (base flattened).
type httpListener147 struct {
	sqlListener
	Routes routes147 `json:"routes"`
}

type listeners147 struct {
	Version string                     `json:"version"`
	SQL     map[string]sqlListener     `json:"sql"`
	HTTP    map[string]httpListener147 `json:"http"`
}

// routeGroup serializes as {"enabled":false} or
// {"enabled":true,"allowed_roles":"..."}.
type routeGroup struct {
	Enabled      bool   `json:"enabled"`
	AllowedRoles string `json:"allowed_roles,omitempty"`
}

type routes2632 struct {
	Base          routeGroup `json:"base"`
	Webhook       routeGroup `json:"webhook"`
	Internal      routeGroup `json:"internal"`
	Metrics       routeGroup `json:"metrics"`
	Profiling     routeGroup `json:"profiling"`
	MCPAgent      routeGroup `json:"mcp_agent"`
	MCPDeveloper  routeGroup `json:"mcp_developer"`
	ConsoleConfig routeGroup `json:"console_config"`
}

type httpListener2632 struct {
	Addr              string     `json:"addr"`
	AuthenticatorKind string     `json:"authenticator_kind"`
	EnableTLS         bool       `json:"enable_tls"`
	Routes            routes2632 `json:"routes"`
}

type listeners2632 struct {
	Version string                      `json:"version"`
	SQL     map[string]sqlListener      `json:"sql"`
	HTTP    map[string]httpListener2632 `json:"http"`
}

// passwordLike are the authenticators for which upstream merges the
// external and internal listeners into one, authenticated, listener.
func passwordLike(kind v1alpha1.AuthenticatorKind) bool {
	return kind == v1alpha1.AuthenticatorPassword || kind == v1alpha1.AuthenticatorSasl || kind == v1alpha1.AuthenticatorOidc
}

func authenticatorKind(mz *v1alpha1.Materialize) v1alpha1.AuthenticatorKind {
	if mz.Spec.AuthenticatorKind == "" {
		return v1alpha1.AuthenticatorNone
	}
	return mz.Spec.AuthenticatorKind
}

func addr(port int32) string { return fmt.Sprintf("0.0.0.0:%d", port) }

// listeners147Config is upstream's create_v0_147_0_listeners_config.
func (e env) listeners147Config() listeners147 {
	kind := authenticatorKind(e.mz)
	tls := e.internalTLS()
	httpKind := string(kind)
	if kind == v1alpha1.AuthenticatorSasl {
		httpKind = string(v1alpha1.AuthenticatorPassword) // SASL is SQL-only
	}
	cfg := listeners147{
		Version: "0.147.0",
		SQL: map[string]sqlListener{
			"external": {addr(e.cfg.SQLPort), string(kind), rolesNormal, tls},
			"internal": {addr(e.cfg.InternalSQLPort), string(v1alpha1.AuthenticatorNone), rolesNormalAndInternal, false},
		},
		HTTP: map[string]httpListener147{
			"external": {sqlListener{addr(e.cfg.HTTPPort), httpKind, rolesNormal, tls},
				routes147{Base: true, Webhook: true, MCPAgent: true, MCPDeveloper: true, ConsoleConfig: true}},
			"internal": {sqlListener{addr(e.cfg.InternalHTTPPort), string(v1alpha1.AuthenticatorNone), rolesNormalAndInternal, false},
				routes147{Base: true, Webhook: true, Internal: true, Metrics: true, Profiling: true, MCPAgent: true, MCPDeveloper: true}},
		},
	}
	if passwordLike(kind) {
		delete(cfg.SQL, "internal")
		delete(cfg.HTTP, "internal")
		sql := cfg.SQL["external"]
		sql.AllowedRoles = rolesNormalAndInternal
		cfg.SQL["external"] = sql
		http := cfg.HTTP["external"]
		http.AllowedRoles = rolesNormalAndInternal
		http.Routes.Internal, http.Routes.Profiling = true, true
		cfg.HTTP["external"] = http
		cfg.HTTP["metrics"] = httpListener147{
			sqlListener{addr(e.cfg.InternalHTTPPort), string(v1alpha1.AuthenticatorNone), rolesNormalAndInternal, false},
			routes147{Metrics: true}}
	}
	return cfg
}

// to2632 is upstream's migration: every enabled group inherits the
// listener's single allowed_roles.
func (l listeners147) to2632() listeners2632 {
	out := listeners2632{Version: "26.32.0", SQL: l.SQL, HTTP: map[string]httpListener2632{}}
	for name, h := range l.HTTP {
		group := func(enabled bool) routeGroup {
			if enabled {
				return routeGroup{Enabled: true, AllowedRoles: h.AllowedRoles}
			}
			return routeGroup{}
		}
		r := h.Routes
		out.HTTP[name] = httpListener2632{Addr: h.Addr, AuthenticatorKind: h.AuthenticatorKind, EnableTLS: h.EnableTLS,
			Routes: routes2632{group(r.Base), group(r.Webhook), group(r.Internal), group(r.Metrics), group(r.Profiling),
				group(r.MCPAgent), group(r.MCPDeveloper), group(r.ConsoleConfig)}}
	}
	return out
}

// listenersJSON is the listeners file in the schema the image's
// environmentd parses.
func (e env) listenersJSON() string {
	legacy := e.listeners147Config()
	var v any = legacy
	if e.meetsVersion(perRouteGroupRolesVersion) {
		current := legacy.to2632()
		if passwordLike(authenticatorKind(e.mz)) {
			// One listener serves everyone: only internal roles (mz_system)
			// reach the internal and profiling routes.
			ext := current.HTTP["external"]
			ext.Routes.Internal = routeGroup{Enabled: true, AllowedRoles: rolesInternal}
			ext.Routes.Profiling = routeGroup{Enabled: true, AllowedRoles: rolesInternal}
			current.HTTP["external"] = ext
		}
		v = current
	}
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain structs always encode
	}
	return string(raw)
}
