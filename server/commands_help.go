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
			writeCommandInfo(c, &protocol.Commands[i])
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
				writeCommandInfo(c, cmd)
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
		c.wr.WriteArray(2 * len(cmds))
		for _, cmd := range cmds {
			c.wr.WriteBulkString(cmd.Name)
			fields := 6
			if len(cmd.Args) > 0 {
				fields += 2
			}
			c.wr.WriteArray(fields)
			c.wr.WriteBulkString("summary")
			c.wr.WriteBulkString(cmd.Summary)
			c.wr.WriteBulkString("since")
			c.wr.WriteBulkString("0.1.0")
			c.wr.WriteBulkString("group")
			c.wr.WriteBulkString(cmd.Group)
			if len(cmd.Args) > 0 {
				c.wr.WriteBulkString("arguments")
				writeArgDocs(c, cmd.Args)
			}
		}
	default:
		return protocol.UnknownSubcommandError("command", args[1])
	}
	return nil
}

// writeArgDocs writes arguments as COMMAND DOCS does: a list of maps,
// flattened to arrays in RESP2.
func writeArgDocs(c *conn, args []protocol.Arg) {
	c.wr.WriteArray(len(args))
	for _, a := range args {
		var flags []string
		if a.Optional {
			flags = append(flags, "optional")
		}
		if a.Multiple {
			flags = append(flags, "multiple")
		}
		fields := 4
		if a.Token != "" {
			fields += 2
		}
		if len(flags) > 0 {
			fields += 2
		}
		if len(a.Args) > 0 {
			fields += 2
		}
		c.wr.WriteArray(fields)
		c.wr.WriteBulkString("name")
		c.wr.WriteBulkString(a.Name)
		c.wr.WriteBulkString("type")
		c.wr.WriteBulkString(a.Type)
		if a.Token != "" {
			c.wr.WriteBulkString("token")
			c.wr.WriteBulkString(a.Token)
		}
		if len(flags) > 0 {
			c.wr.WriteBulkString("flags")
			c.wr.WriteArray(len(flags))
			for _, f := range flags {
				c.wr.WriteString(f)
			}
		}
		if len(a.Args) > 0 {
			c.wr.WriteBulkString("arguments")
			writeArgDocs(c, a.Args)
		}
	}
}

func writeCommandInfo(c *conn, cmd *protocol.Command) {
	c.wr.WriteArray(10)
	c.wr.WriteBulkString(cmd.Name)
	c.wr.WriteInt(cmd.Arity)
	c.wr.WriteArray(len(cmd.Flags))
	for _, f := range cmd.Flags {
		c.wr.WriteString(f)
	}
	c.wr.WriteInt(cmd.FirstKey)
	c.wr.WriteInt(cmd.LastKey)
	c.wr.WriteInt(cmd.Step)
	c.wr.WriteArray(1)
	c.wr.WriteString("@" + cmd.Category) // ACL categories
	c.wr.WriteArray(0)                   // tips
	c.wr.WriteArray(0)                   // key specs
	c.wr.WriteArray(len(cmd.Subcommands))
	for _, sub := range cmd.Subcommands {
		c.wr.WriteArray(10)
		c.wr.WriteBulkString(cmd.Name + "|" + sub.Name)
		c.wr.WriteInt(sub.Arity)
		c.wr.WriteArray(0) // flags
		c.wr.WriteInt(0)
		c.wr.WriteInt(0)
		c.wr.WriteInt(0)
		c.wr.WriteArray(1)
		c.wr.WriteString("@" + sub.Category)
		c.wr.WriteArray(0)
		c.wr.WriteArray(0)
		c.wr.WriteArray(0)
	}
}
