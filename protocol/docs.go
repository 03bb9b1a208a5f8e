package protocol

import (
	"fmt"
	"strings"
)

// CommandTableMarkdown renders the command table for docs/commands.md, so the
// docs list exactly the commands the server dispatches.
func CommandTableMarkdown() string {
	var b strings.Builder
	b.WriteString("| Command | Arity | Flags | ACL category | Summary |\n|---|---|---|---|---|\n")
	for _, c := range Commands {
		// A pipe would end the table cell, even inside backticks.
		usage := strings.ReplaceAll(c.Usage(), "|", `\|`)
		fmt.Fprintf(&b, "| `%s` | %d | %s | %s | %s |\n", usage, c.Arity, strings.Join(c.Flags, ", "), categoryCell(c), c.Summary)
	}
	return b.String()
}

// categoryCell is a command's ACL category, and its subcommands' where
// they differ.
func categoryCell(c Command) string {
	cell := "@" + c.Category
	for _, cat := range c.RedisCategories {
		cell += " @" + cat
	}
	var subs []string
	for _, s := range c.Subcommands {
		if s.Category != c.Category {
			subs = append(subs, strings.ToUpper(s.Name)+" @"+s.Category)
		}
	}
	if len(subs) > 0 {
		cell += " (" + strings.Join(subs, ", ") + ")"
	}
	return cell
}

// ErrorTableMarkdown renders the error codes for docs/commands.md.
func ErrorTableMarkdown() string {
	var b strings.Builder
	b.WriteString("| Code | Meaning |\n|---|---|\n")
	for _, e := range ErrorCodes {
		fmt.Fprintf(&b, "| `%s` | %s |\n", e.Code, e.Meaning)
	}
	return b.String()
}

// Generated sections of docs/commands.md sit between these markers.
const (
	GeneratedBegin = "<!-- BEGIN GENERATED %s: edit protocol/commands.go or protocol/errors.go, then run `make docs` -->\n"
	GeneratedEnd   = "<!-- END GENERATED %s -->\n"
)

// GeneratedSections maps each generated section's name to its content.
func GeneratedSections() map[string]string {
	return map[string]string{
		"commands": CommandTableMarkdown(),
		"errors":   ErrorTableMarkdown(),
	}
}

// FillGenerated replaces every generated section of doc with its current
// content and reports an error for a section whose markers are missing.
func FillGenerated(doc string) (string, error) {
	for name, content := range GeneratedSections() {
		begin, end := fmt.Sprintf(GeneratedBegin, name), fmt.Sprintf(GeneratedEnd, name)
		i := strings.Index(doc, begin)
		j := strings.Index(doc, end)
		if i < 0 || j < i {
			return "", fmt.Errorf("protocol: docs have no generated %q section", name)
		}
		doc = doc[:i+len(begin)] + content + doc[j:]
	}
	return doc, nil
}
