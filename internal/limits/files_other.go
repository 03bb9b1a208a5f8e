//go:build !linux && !darwin

package limits

// OpenFiles reports no limit to fit: max clients stay as configured.
func OpenFiles() (*FileLimit, error) { return nil, nil }

// SetOpenFiles does nothing: there is no limit to set.
func SetOpenFiles(FileLimit) error { return nil }
