package server

import (
	"strings"
	"testing"

	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/replica"
)

// TestValidateClusterOnlyFields: a setting that means something in cluster
// mode only is refused without Cluster, naming the field, rather than
// ignored; with Cluster it is accepted.
func TestValidateClusterOnlyFields(t *testing.T) {
	tests := []struct {
		field string
		set   func(*Config)
	}{
		{"ClusterTLS", func(c *Config) { c.ClusterTLS = &replica.TLSConfig{} }},
		{"Redirect", func(c *Config) { c.Redirect = true }},
		{"AnnounceAddr", func(c *Config) { c.AnnounceAddr = "10.0.0.1:7379" }},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.set(&cfg)
			err := cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.field) || !strings.Contains(err.Error(), "Cluster") {
				t.Errorf("Validate = %v, want %s refused without Cluster", err, tt.field)
			}
			cfg.Cluster = &cluster.Config{}
			if err := cfg.Validate(); err != nil {
				t.Errorf("with Cluster, Validate = %v", err)
			}
		})
	}
}
