//go:build linux

package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// TestControl drives the in-memory Fake, correct and then with each fault:
// the correct one must pass every check, each fault must be caught, by
// porcupine and by the checker meant for it.
func TestControl(t *testing.T) {
	tests := []struct {
		fault Fault
		want  string // the checker that must fire
	}{
		{NoFault, ""},
		{LowToken, CheckTokenOrder},
		{DoubleGrant, CheckExclusion},
		{EarlyExpiry, CheckLostAck},
		{LostRelease, CheckLostAck},
	}
	for _, tc := range tests {
		t.Run(tc.fault.String(), func(t *testing.T) {
			t.Parallel()
			fake := &Fake{Fault: tc.fault, Every: 4}
			w := Workload{Clients: 6, Keys: DefaultKeys(), MaxOps: 1500, TTLMin: 20 * time.Millisecond, TTLMax: 200 * time.Millisecond,
				MaxWait: 50 * time.Millisecond, OpTimeout: time.Second, Pace: 3 * time.Millisecond, Seed: 1}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			if err := Setup(ctx, fake, w.Keys); err != nil {
				t.Fatal(err)
			}
			h := NewHistory()
			st := Drive(ctx, fake, w, h)
			ops := h.Ops()
			if st.Granted == 0 || len(ops) < 200 {
				t.Fatalf("a run too thin to tell: %d ops, %d grants", len(ops), st.Granted)
			}
			lin := porcupine.Ok
			for _, r := range Linearizable(ops, Lateness{Base: 5 * time.Millisecond}, 20*time.Second) {
				if r.Result != porcupine.Ok {
					lin = r.Result
				}
			}
			fired := map[string]int{}
			vs := Check(ops, Lateness{Base: 5 * time.Millisecond})
			for _, v := range vs {
				fired[v.Check]++
			}
			t.Logf("%d ops, %d grants, porcupine %s, violations %v", len(ops), st.Granted, lin, fired)
			if tc.want == "" {
				if lin != porcupine.Ok || len(vs) > 0 {
					for _, v := range vs[:min(len(vs), 3)] {
						t.Log(v)
					}
					t.Fatalf("a correct server failed the checks")
				}
				return
			}
			if lin != porcupine.Illegal {
				t.Errorf("porcupine says %s of a server with %s", lin, tc.fault)
			}
			if fired[tc.want] == 0 {
				t.Errorf("%s did not catch %s", tc.want, tc.fault)
			}
		})
	}
}
