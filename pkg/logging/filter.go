package logging

import (
	"fmt"
	"strings"

	"go.uber.org/zap/zapcore"
)

// Target is upstream orchestratord's crate, the tracing target (module path)
// its events have: what an upstream filter's directives are matched
// against here.
const Target = "mz_orchestratord"

// Off is the level of a filter that enables nothing.
const Off = zapcore.FatalLevel + 1

// FilterLevel is the level an upstream filter gives this program's events.
// The syntax is upstream's --startup-log-filter (tracing_subscriber's
// EnvFilter): comma-separated directives, [target=]level or a bare target
// (all its events). As upstream, a directive applies when the event's
// target starts with the directive's, the longest target wins over a
// shorter one and the last over an equal one, and an event no directive
// covers is not emitted (Off). Every event here has one level, so a
// directive for part of the crate (mz_orchestratord::k8s=debug) is taken as
// the most verbose it and the crate-wide directive ask for. Directives
// with span filters (target[span{field=value}]=level) only apply within
// upstream's spans: they are ignored.
func FilterLevel(filter string) (zapcore.Level, error) {
	level, covered := Off, -1 // covered: the length of the best covering target
	var parts []zapcore.Level
	for _, d := range strings.Split(filter, ",") {
		d = strings.TrimSpace(d)
		if d == "" || strings.ContainsAny(d, "[{") {
			continue
		}
		target, name, hasLevel := strings.Cut(d, "=")
		if !hasLevel {
			if _, ok := parseLevel(d); ok {
				target, name = "", d
			} else {
				name = "trace"
			}
		}
		l, ok := parseLevel(name)
		if !ok {
			return 0, fmt.Errorf("directive %q: %q is not a level (trace, debug, info, warn, error or off)", d, name)
		}
		switch {
		case strings.HasPrefix(Target, target) && len(target) >= covered:
			level, covered = l, len(target)
		case strings.HasPrefix(target, Target+"::"):
			parts = append(parts, l)
		}
	}
	for _, l := range parts {
		level = min(level, l)
	}
	return level, nil
}

// parseLevel reads a tracing LevelFilter: a name, any case, or 0 (off) to
// 5 (trace). trace is zap's debug, the most verbose it has.
func parseLevel(s string) (zapcore.Level, bool) {
	switch strings.ToLower(s) {
	case "trace", "debug", "5", "4":
		return zapcore.DebugLevel, true
	case "info", "3":
		return zapcore.InfoLevel, true
	case "warn", "2":
		return zapcore.WarnLevel, true
	case "error", "1":
		return zapcore.ErrorLevel, true
	case "off", "0":
		return Off, true
	}
	return 0, false
}
