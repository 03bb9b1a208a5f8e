package protocol

import "testing"

func TestCheckClientName(t *testing.T) {
	for name, ok := range map[string]bool{"worker-1": true, "": true, "a b": false, "tab\t": false, "é": false, "~!": true} {
		if err := CheckClientName([]byte(name)); (err == nil) != ok {
			t.Errorf("CheckClientName(%q) = %v, want ok %v", name, err, ok)
		}
	}
}
