package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/rs/zerolog"
)

func TestHclogAdapterWritesFields(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		log  func(hclog.Logger)
		want map[string]any
	}{
		{"pairs", func(l hclog.Logger) { l.Info("entering leader state", "term", 3, "id", "n1") },
			map[string]any{"level": "info", "message": "entering leader state", "term": 3.0, "id": "n1", "component": "raft"}},
		{"error and format", func(l hclog.Logger) {
			l.Error("failed", "error", errors.New("EOF"), "cmd", hclog.Fmt("%d-%s", 7, "x"))
		}, map[string]any{"level": "error", "error": "EOF", "cmd": "7-x"}},
		{"odd argument", func(l hclog.Logger) { l.Warn("odd", "k") }, map[string]any{"level": "warn", "extra": "k"}},
		{"implied and named", func(l hclog.Logger) { l.With("peer", "n2").Named("repl").Debug("sent") },
			map[string]any{"level": "debug", "peer": "n2", "component": "raft.repl"}},
		{"below the level", func(l hclog.Logger) { l.Trace("hidden") }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			tc.log(newHclogAdapter(zerolog.New(&buf).Level(zerolog.DebugLevel), "raft"))
			if tc.want == nil {
				if buf.Len() != 0 {
					t.Fatalf("logged %q", buf.String())
				}
				return
			}
			if n := bytes.Count(buf.Bytes(), []byte(`"component"`)); n != 1 {
				t.Errorf("%d component fields in %s", n, buf.String())
			}
			var got map[string]any
			if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
				t.Fatalf("%q: %v", buf.String(), err)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %v, want %v (line %s)", k, got[k], v, buf.String())
				}
			}
		})
	}
	l := newHclogAdapter(zerolog.New(nil).Level(zerolog.WarnLevel), "raft")
	if l.IsInfo() || !l.IsWarn() || l.GetLevel() != hclog.Warn {
		t.Errorf("level checks of a warn logger: IsInfo %v IsWarn %v GetLevel %v", l.IsInfo(), l.IsWarn(), l.GetLevel())
	}
}
