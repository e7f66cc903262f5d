package security

// WriteFileForTest overwrites path with data (mode 0644).
func WriteFileForTest(path string, data []byte) error { return writeFile(path, data, 0o644, true) }
