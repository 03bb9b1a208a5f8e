package limits

import (
	"strings"
	"testing"
	"time"
)

func TestParseOutputLimits(t *testing.T) {
	def := DefaultOutputLimits()
	tests := []struct {
		in   string
		want OutputLimits
		err  string
	}{
		{in: "normal 0 0 0 pubsub 32mb 8mb 60", want: def},
		{in: "normal 1kb 2k 3", want: OutputLimits{Normal: OutputLimit{Hard: 1024, Soft: 2000, SoftFor: 3 * time.Second}, PubSub: def.PubSub}},
		{in: "PUBSUB 1GB 1m 0", want: OutputLimits{PubSub: OutputLimit{Hard: 1 << 30, Soft: 1e6}}},
		{in: "pubsub 100 50b 1 normal 7 0 0", want: OutputLimits{Normal: OutputLimit{Hard: 7}, PubSub: OutputLimit{Hard: 100, Soft: 50, SoftFor: time.Second}}},
		{in: "", err: "want groups"},
		{in: "normal 0 0", err: "want groups"},
		{in: "replica 256mb 64mb 60", err: "no replicas"},
		{in: "other 0 0 0", err: "unknown class"},
		{in: "normal -1 0 0", err: "size"},
		{in: "normal 1tb 0 0", err: "size"},
		{in: "normal 0 0 1.5", err: "soft seconds"},
		{in: "normal 0 0 -1", err: "soft seconds"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseOutputLimits(tt.in, def)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one saying %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
			// String is Redis's CONFIG GET form, which parses back.
			if again, err := ParseOutputLimits(got.String(), OutputLimits{}); err != nil || again != got {
				t.Fatalf("%q parses to %+v, %v", got.String(), again, err)
			}
		})
	}
	if got := def.String(); got != "normal 0 0 0 pubsub 33554432 8388608 60" {
		t.Fatalf("default %q, want Redis's", got)
	}
	bad := def
	bad.Normal.Soft = -1
	if err := bad.Validate(); err == nil {
		t.Fatal("a negative limit passed Validate")
	}
}
