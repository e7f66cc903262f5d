package report

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// File names Write creates in its directory.
const (
	// JSONFile holds the whole Report, raw figures and summary.
	JSONFile = "report.json"
	// MarkdownFile holds WriteMarkdown's summary.
	MarkdownFile = "summary.md"
)

// WriteJSON writes the whole Report (raw figures and Summary) as indented
// JSON. Errors: the encoder's or w's.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// ReadJSON decodes a Report written by WriteJSON. Errors: the decode error,
// wrapped.
func ReadJSON(rd io.Reader) (*Report, error) {
	var r Report
	if err := json.NewDecoder(rd).Decode(&r); err != nil {
		return nil, fmt.Errorf("report: decode: %w", err)
	}
	return &r, nil
}

// Write creates dir if needed and writes JSONFile and MarkdownFile into it,
// replacing files of those names. Errors: file-system and write errors,
// wrapped with the file's path.
func (r *Report) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := writeFile(filepath.Join(dir, JSONFile), r.WriteJSON); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, MarkdownFile), r.WriteMarkdown)
}

// writeFile creates path and fills it with write.
func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("report: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("report: close %s: %w", path, err)
	}
	return nil
}
