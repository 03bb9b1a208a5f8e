package server

import (
	"strings"

	"github.com/leasehold/leasehold/protocol"
)

// HELP and COMMAND: the command table, for people and for clients.

// handleHelp serves HELP [command] for people typing at a terminal (telnet,
// nc): the command table as lines, in the shape of Redis's CONFIG HELP, an
// array of status lines.
func handleHelp(c *conn, args [][]byte) error {
	switch len(args) {
	case 1:
		writeLines(c, protocol.HelpIndex())
	case 2:
		cmd := protocol.Lookup(args[1])
		if cmd == nil {
			return protocol.UnknownHelpError(args[1])
		}
		writeLines(c, cmd.Help())
	default:
		return protocol.ArityError("help")
	}
	return nil
}

// writeHelpSubcommand answers a command's HELP subcommand (CLIENT HELP,
// COMMAND HELP, CONFIG HELP), which Redis's error for an unknown subcommand
// tells the user to try, with HELP command's reply.
func writeHelpSubcommand(c *conn, args [][]byte) error {
	if len(args) != 2 {
		return protocol.ArityError(string(args[0]) + "|help")
	}
	writeLines(c, protocol.Lookup(args[0]).Help())
	return nil
}

func writeLines(c *conn, lines []string) {
	c.wr.WriteArray(len(lines))
	for _, l := range lines {
		c.wr.WriteString(l)
	}
}

// handleCommand reports the command table in Redis 7's shapes.
func handleCommand(c *conn, args [][]byte) error {
	if len(args) == 1 {
		c.wr.WriteArray(len(protocol.Commands))
		for i := range protocol.Commands {
			protocol.WriteCommandInfo(c.wr, &protocol.Commands[i])
		}
		return nil
	}
	switch sub := strings.ToLower(string(args[1])); sub {
	case "help":
		return writeHelpSubcommand(c, args)
	case "count":
		if len(args) != 2 {
			return protocol.ArityError("command|count")
		}
		c.wr.WriteInt(len(protocol.Commands))
	case "list":
		c.wr.WriteArray(len(protocol.Commands))
		for _, cmd := range protocol.Commands {
			c.wr.WriteBulkString(cmd.Name)
		}
	case "info":
		c.wr.WriteArray(len(args) - 2)
		for _, name := range args[2:] {
			if cmd := protocol.Lookup(name); cmd != nil {
				protocol.WriteCommandInfo(c.wr, cmd)
			} else {
				c.wr.WriteNull()
			}
		}
	case "docs":
		var cmds []*protocol.Command
		if len(args) == 2 {
			for i := range protocol.Commands {
				cmds = append(cmds, &protocol.Commands[i])
			}
		}
		for _, name := range args[2:] {
			if cmd := protocol.Lookup(name); cmd != nil {
				cmds = append(cmds, cmd)
			}
		}
		protocol.WriteCommandDocs(c.wr, cmds)
	default:
		return protocol.UnknownSubcommandError("command", args[1])
	}
	return nil
}
