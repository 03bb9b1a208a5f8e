package acl

import (
	"sync"
	"time"
)

// ACL LOG, as Redis's: the latest refusals, newest first, at most LogMax;
// a refusal like one logged less than LogGrouping ago (same reason, object
// and user) counts in that entry instead.
const (
	LogMax      = 128
	LogGrouping = 60 * time.Second
)

// Log is the refusals ACL LOG lists. The zero Log is empty and ready; it
// is safe for concurrent use.
type Log struct {
	mu      sync.Mutex // guards the fields below
	entries []*LogEntry
	nextID  uint64
}

// LogEntry is one refusal, or several alike.
type LogEntry struct {
	Count                    int
	Reason, Object, Username string
	ClientInfo               string // the client's, as CLIENT INFO shows it, at the latest refusal
	ID                       uint64
	Created, Updated         time.Time
}

// Add logs a refusal: reason auth, command, key, channel or tls-cert;
// object the command, key, channel, or AUTH; username the user, or the
// name an AUTH tried; clientInfo the client's description.
func (l *Log) Add(reason, object, username, clientInfo string) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, e := range l.entries {
		if e.Reason == reason && e.Object == object && e.Username == username && now.Sub(e.Updated) < LogGrouping {
			e.Count++
			e.Updated, e.ClientInfo = now, clientInfo
			copy(l.entries[1:i+1], l.entries[:i])
			l.entries[0] = e
			return
		}
	}
	e := &LogEntry{Count: 1, Reason: reason, Object: object, Username: username, ClientInfo: clientInfo, ID: l.nextID, Created: now, Updated: now}
	l.nextID++
	if len(l.entries) < LogMax {
		l.entries = append(l.entries, nil)
	}
	copy(l.entries[1:], l.entries)
	l.entries[0] = e
}

// Newest returns copies of the newest count entries, newest first.
func (l *Log) Newest(count int) []LogEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]LogEntry, min(count, len(l.entries)))
	for i := range out {
		out[i] = *l.entries[i]
	}
	return out
}

// Reset drops every entry.
func (l *Log) Reset() {
	l.mu.Lock()
	l.entries = nil
	l.mu.Unlock()
}
