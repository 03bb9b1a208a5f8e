//go:build !unix

package persist

import (
	"os"
	"path/filepath"
)

// lockDir opens dir's LOCK file; this platform gets no exclusive lock.
func lockDir(dir string) (*os.File, error) {
	return os.OpenFile(filepath.Join(dir, "LOCK"), os.O_RDWR|os.O_CREATE, 0o600)
}
