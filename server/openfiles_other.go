//go:build !linux && !darwin

package server

// openFilesLimit reports no limit to fit: max clients stay as configured.
func openFilesLimit() (*fileLimit, error) { return nil, nil }

func setOpenFilesLimit(fileLimit) error { return nil }
