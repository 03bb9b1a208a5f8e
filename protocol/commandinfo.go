package protocol

import "github.com/tidwall/redcon"

// The command table as COMMAND replies with it, in Redis 7's shapes.

// WriteCommandDocs writes COMMAND DOCS's reply for cmds: each name, then a
// map of its summary, version, group and arguments, flattened to arrays in
// RESP2.
func WriteCommandDocs(w *redcon.Writer, cmds []*Command) {
	w.WriteArray(2 * len(cmds))
	for _, cmd := range cmds {
		w.WriteBulkString(cmd.Name)
		fields := 6
		if len(cmd.Args) > 0 {
			fields += 2
		}
		w.WriteArray(fields)
		w.WriteBulkString("summary")
		w.WriteBulkString(cmd.Summary)
		w.WriteBulkString("since")
		w.WriteBulkString("0.1.0")
		w.WriteBulkString("group")
		w.WriteBulkString(cmd.Group)
		if len(cmd.Args) > 0 {
			w.WriteBulkString("arguments")
			writeArgDocs(w, cmd.Args)
		}
	}
}

// writeArgDocs writes arguments as COMMAND DOCS does: a list of maps,
// flattened to arrays in RESP2.
func writeArgDocs(w *redcon.Writer, args []Arg) {
	w.WriteArray(len(args))
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
		w.WriteArray(fields)
		w.WriteBulkString("name")
		w.WriteBulkString(a.Name)
		w.WriteBulkString("type")
		w.WriteBulkString(a.Type)
		if a.Token != "" {
			w.WriteBulkString("token")
			w.WriteBulkString(a.Token)
		}
		if len(flags) > 0 {
			w.WriteBulkString("flags")
			w.WriteArray(len(flags))
			for _, f := range flags {
				w.WriteString(f)
			}
		}
		if len(a.Args) > 0 {
			w.WriteBulkString("arguments")
			writeArgDocs(w, a.Args)
		}
	}
}

// WriteCommandInfo writes cmd as COMMAND and COMMAND INFO reply for each
// command, in Redis 7's shape: name, arity, flags, key positions, ACL
// categories, tips, key specs and subcommands.
func WriteCommandInfo(w *redcon.Writer, cmd *Command) {
	w.WriteArray(10)
	w.WriteBulkString(cmd.Name)
	w.WriteInt(cmd.Arity)
	w.WriteArray(len(cmd.Flags))
	for _, f := range cmd.Flags {
		w.WriteString(f)
	}
	w.WriteInt(cmd.FirstKey)
	w.WriteInt(cmd.LastKey)
	w.WriteInt(cmd.Step)
	w.WriteArray(1 + len(cmd.RedisCategories)) // ACL categories
	w.WriteString("@" + cmd.Category)
	for _, cat := range cmd.RedisCategories {
		w.WriteString("@" + cat)
	}
	w.WriteArray(0) // tips
	w.WriteArray(0) // key specs
	w.WriteArray(len(cmd.Subcommands))
	for _, sub := range cmd.Subcommands {
		w.WriteArray(10)
		w.WriteBulkString(cmd.Name + "|" + sub.Name)
		w.WriteInt(sub.Arity)
		w.WriteArray(0) // flags
		w.WriteInt(0)
		w.WriteInt(0)
		w.WriteInt(0)
		w.WriteArray(1)
		w.WriteString("@" + sub.Category)
		w.WriteArray(0)
		w.WriteArray(0)
		w.WriteArray(0)
	}
}
