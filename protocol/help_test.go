package protocol

import (
	"strings"
	"testing"
)

func TestHelpIndex(t *testing.T) {
	lines := HelpIndex()
	if len(lines) != 1+len(Commands) {
		t.Fatalf("%d lines, want a heading and one per command (%d)", len(lines), len(Commands))
	}
	column := -1
	for i, c := range Commands {
		line := lines[1+i]
		name, rest, _ := strings.Cut(line, " ")
		if name != strings.ToUpper(c.Name) || strings.TrimLeft(rest, " ") != c.Summary {
			t.Errorf("line %q, want %s and its summary", line, strings.ToUpper(c.Name))
		}
		if column < 0 {
			column = len(line) - len(c.Summary)
		}
		if len(line)-len(c.Summary) != column {
			t.Errorf("line %q: the summary is not aligned with the first line's, at column %d", line, column)
		}
	}
	checkStatusLines(t, lines)
}

func TestCommandHelp(t *testing.T) {
	for _, c := range Commands {
		t.Run(c.Name, func(t *testing.T) {
			lines := c.Help()
			if lines[0] != c.Usage() {
				t.Errorf("first line %q, want the syntax %q", lines[0], c.Usage())
			}
			var words []string
			for _, l := range lines[1:] {
				if !strings.HasPrefix(l, helpIndent) || len(l) > helpWidth {
					t.Errorf("line %q is not indented or longer than %d", l, helpWidth)
				}
				words = append(words, strings.Fields(l)...)
			}
			if got := strings.Join(words, " "); got != c.Summary {
				t.Errorf("wrapped summary reads %q, want %q", got, c.Summary)
			}
			checkStatusLines(t, lines)
		})
	}
}

func TestWrap(t *testing.T) {
	tests := []struct {
		text  string
		width int
		want  []string
	}{
		{"", 10, nil},
		{"a b c", 10, []string{"  a b c"}},
		{"aaa bbb ccc", 9, []string{"  aaa bbb", "  ccc"}},
		{"aaa  bbb\tccc", 9, []string{"  aaa bbb", "  ccc"}},
		{"tiny averyveryverylongword end", 10, []string{"  tiny", "  averyveryverylongword", "  end"}},
	}
	for _, tt := range tests {
		got := wrap(tt.text, "  ", tt.width)
		if strings.Join(got, "|") != strings.Join(tt.want, "|") || len(got) != len(tt.want) {
			t.Errorf("wrap(%q, %d) = %q, want %q", tt.text, tt.width, got, tt.want)
		}
	}
}

// checkStatusLines fails for a line that cannot be a RESP simple string.
func checkStatusLines(t *testing.T, lines []string) {
	t.Helper()
	for _, l := range lines {
		if l == "" || strings.ContainsAny(l, "\r\n") {
			t.Errorf("line %q is empty or holds CR or LF", l)
		}
	}
}
