package logging

import (
	"fmt"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/materializeinc/orchestratord/pkg/boundedtext"
)

// MaxFieldBytes bounds each text a log line carries: its message and every
// string, error or Stringer field. Errors quote what they were given (an
// object's name, a Secret's entry, an API server's or environmentd's
// answer), which a tenant may have written a megabyte of. (Fields of other
// kinds, arrays and objects, are the programs' own values.)
const MaxFieldBytes = 4096

// boundedCore cuts what it writes to MaxFieldBytes per text (boundedtext).
type boundedCore struct{ zapcore.Core }

func (c boundedCore) With(fields []zapcore.Field) zapcore.Core {
	return boundedCore{c.Core.With(bounded(fields))}
}

func (c boundedCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(ent.Level) {
		return ce.AddCore(ent, c)
	}
	return ce
}

func (c boundedCore) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	ent.Message = boundedtext.Cut(ent.Message, MaxFieldBytes)
	return c.Core.Write(ent, bounded(fields))
}

// bounded returns fields with each text cut, copied only when one is.
func bounded(fields []zapcore.Field) []zapcore.Field {
	out := fields
	for i, f := range fields {
		text, ok := longText(f)
		if !ok {
			continue
		}
		if &out[0] == &fields[0] {
			out = append([]zapcore.Field(nil), fields...)
		}
		out[i] = zap.String(f.Key, boundedtext.Cut(text, MaxFieldBytes))
	}
	return out
}

// longText is f's text when f is a string, error or Stringer field whose
// text is longer than MaxFieldBytes. A typed nil, whose method panics, is
// left to the encoder, which writes it as zap does.
func longText(f zapcore.Field) (text string, long bool) {
	defer func() {
		if recover() != nil {
			text, long = "", false
		}
	}()
	switch f.Type {
	case zapcore.StringType:
		text = f.String
	case zapcore.ErrorType:
		if err, ok := f.Interface.(error); ok && err != nil {
			text = err.Error()
		}
	case zapcore.StringerType:
		if s, ok := f.Interface.(fmt.Stringer); ok && s != nil {
			text = s.String()
		}
	}
	return text, len(text) > MaxFieldBytes
}
