package protocol

import "strings"

// helpWidth is where HELP COMMAND wraps its text: a telnet or nc session's
// terminal is 80 columns at least. HELP's index keeps a command's line whole,
// its syntax and summary, so that one line is one command.
const helpWidth = 80

// helpIndent starts a description under its syntax line, as in Redis's
// CONFIG HELP.
const helpIndent = "    "

// HelpIndex is HELP's reply without an argument: a heading, then one line per
// command of the table, its name and its summary.
func HelpIndex() []string { return helpIndex }

var helpIndex = func() []string {
	nameWidth := 0
	for _, c := range Commands {
		nameWidth = max(nameWidth, len(c.Name))
	}
	lines := []string{"leasehold commands (HELP <command> for one command's syntax):"}
	for _, c := range Commands {
		name := strings.ToUpper(c.Name)
		lines = append(lines, name+strings.Repeat(" ", nameWidth+2-len(name))+c.Summary)
	}
	return lines
}()

// Help is HELP's reply for one command: its syntax line, then its summary
// indented and wrapped for a terminal.
func (c *Command) Help() []string {
	return append([]string{c.Usage()}, wrap(c.Summary, helpIndent, helpWidth)...)
}

// wrap breaks text into lines of at most width bytes, each starting with
// indent, at spaces; a word longer than a line gets a line of its own.
func wrap(text, indent string, width int) []string {
	var lines []string
	line := indent
	for _, word := range strings.Fields(text) {
		if len(line) > len(indent) && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = indent
		}
		if len(line) > len(indent) {
			line += " "
		}
		line += word
	}
	if len(line) > len(indent) {
		lines = append(lines, line)
	}
	return lines
}
