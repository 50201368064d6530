package controlplane

import (
	"fmt"

	"github.com/materializeinc/orchestratord/test/audit"
)

// AuditEvent is an audit log entry (see package audit).
type AuditEvent = audit.Event

// AuditEvents reads the audit log written so far.
func (cp *ControlPlane) AuditEvents() ([]AuditEvent, error) {
	if cp.AuditLogPath == "" {
		return nil, fmt.Errorf("control plane started without Options.Audit")
	}
	return audit.Read(cp.AuditLogPath, "")
}
