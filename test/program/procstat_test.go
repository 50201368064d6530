package program

import (
	"os"
	"strconv"
	"testing"
)

// ProcStat reads this process's own line: field 3 (state) first, and the
// clock-tick counters at the indexes its comment gives.
func TestProcStatIndexesFieldsAfterTheCommandName(t *testing.T) {
	fields, err := ProcStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if state := fields[0]; state != "R" && state != "S" {
		t.Errorf("state %q, want R or S for a running test", state)
	}
	for name, i := range map[string]int{"utime": 11, "stime": 12, "starttime": 19} {
		if _, err := strconv.ParseUint(fields[i], 10, 64); err != nil {
			t.Errorf("%s (index %d) %q: %v", name, i, fields[i], err)
		}
	}
	if _, err := ProcStat(-1); err == nil {
		t.Error("no error for a process that does not exist")
	}
}
