package protocol

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	gotoken "go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/locker"
)

// checkWireText fails unless s is a valid RESP error line: an uppercase code
// word (A-Z only), a space, a message, and no CR or LF.
func checkWireText(t *testing.T, s string) {
	t.Helper()
	code, msg, ok := strings.Cut(s, " ")
	if !ok || code == "" || msg == "" {
		t.Errorf("%q: want \"CODE message\"", s)
	}
	for _, c := range code {
		if c < 'A' || c > 'Z' {
			t.Errorf("%q: code word %q is not A-Z only", s, code)
			break
		}
	}
	if strings.ContainsAny(s, "\r\n") {
		t.Errorf("%q: contains CR or LF", s)
	}
	if strings.Contains(s, "locker:") {
		t.Errorf("%q: leaks a Go package prefix", s)
	}
}

func TestReply(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		want      string // exact text, if set
		prefix    string // else the text starts with prefix
		contains  string // and contains this
		wantKnown bool
	}{
		{name: "syntax", err: ErrSyntax, want: "ERR syntax error", wantKnown: true},
		{name: "wrapped protocol.Error", err: fmt.Errorf("parse: %w", ErrNotInteger),
			want: "ERR value is not an integer or out of range", wantKnown: true},
		{name: "invalid expire", err: InvalidExpireError("ACQUIRE"),
			want: "ERR invalid expire time in 'acquire' command", wantKnown: true},
		{name: "arity", err: ArityError("verify"), want: "ERR wrong number of arguments for 'verify' command", wantKnown: true},
		{name: "noproto", err: ErrNoProto, want: "NOPROTO sorry, this protocol version is not supported", wantKnown: true},
		{name: "protocol error", err: &ProtocolError{Msg: "invalid bulk length"},
			want: "ERR Protocol error: invalid bulk length", wantKnown: true},
		{name: "wrapped protocol error", err: fmt.Errorf("read: %w", &ProtocolError{Msg: "invalid multibulk length"}),
			want: "ERR Protocol error: invalid multibulk length", wantKnown: true},

		{name: "no such lock with key", err: &locker.KeyError{Key: "k", Err: locker.ErrNoSuchLock},
			prefix: "NOLOCK ", contains: `"k"`, wantKnown: true},
		{name: "no such lock with CRLF in key", err: &locker.KeyError{Key: "a\r\nb", Err: locker.ErrNoSuchLock},
			prefix: "NOLOCK ", contains: "a", wantKnown: true},
		{name: "in use", err: locker.ErrInUse, prefix: "INUSE ", wantKnown: true},
		{name: "in use with key", err: &locker.KeyError{Key: "k", Err: locker.ErrInUse},
			prefix: "INUSE ", contains: `"k"`, wantKnown: true},
		{name: "ttl range with detail", err: fmt.Errorf("%w: must be between 1 and 100 ms", locker.ErrTTLRange),
			want: "ERR ttl out of range: must be between 1 and 100 ms", wantKnown: true},
		{name: "no ttl", err: locker.ErrNoTTL, want: "ERR no ttl given and the lock has no default ttl", wantKnown: true},
		{name: "empty key", err: locker.ErrEmptyKey, want: "ERR empty key", wantKnown: true},
		{name: "key too long", err: locker.ErrKeyTooLong, want: "ERR key too long", wantKnown: true},
		{name: "owner too long", err: locker.ErrOwnerTooLong, want: "ERR owner too long", wantKnown: true},
		{name: "table full with bound", err: fmt.Errorf("%w (max-locks 3)", locker.ErrTableFull),
			want: "OOM lock table full (max-locks 3)", wantKnown: true},

		{name: "unrelated", err: errors.New("boom"), want: ErrInternal.Error(), wantKnown: false},
		{name: "context", err: context.Canceled, want: ErrInternal.Error(), wantKnown: false},
		{name: "unmapped locker error", err: locker.ErrClosed, want: ErrInternal.Error(), wantKnown: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, known := Reply(tt.err)
			if known != tt.wantKnown {
				t.Errorf("known = %v, want %v", known, tt.wantKnown)
			}
			if tt.want != "" && got != tt.want {
				t.Errorf("Reply = %q, want %q", got, tt.want)
			}
			if !strings.HasPrefix(got, tt.prefix) || !strings.Contains(got, tt.contains) {
				t.Errorf("Reply = %q, want prefix %q containing %q", got, tt.prefix, tt.contains)
			}
			checkWireText(t, got)
		})
	}
	if got := ErrInternal.Error(); got != "ERR internal error" {
		t.Fatalf("ErrInternal = %q", got)
	}
}

// TestWireErrorsFormat checks every error text this package can put on the
// wire, and that every code it uses is documented in ErrorCodes.
func TestWireErrorsFormat(t *testing.T) {
	documented := map[string]bool{}
	for _, ec := range ErrorCodes {
		if documented[ec.Code] {
			t.Errorf("code %q documented twice", ec.Code)
		}
		documented[ec.Code] = true
		if ec.Meaning == "" {
			t.Errorf("code %q has no meaning", ec.Code)
		}
	}
	wire := []*Error{
		ErrSyntax, ErrNotInteger, ErrBadToken, ErrBadCursor, ErrEmptyOwner, ErrNoProto, ErrInternal,
		ErrBadLockDelay, ErrBadWait, ErrBadPriority, ErrBadLimit, ErrBadNumKeys,
		ArityError("ACQUIRE"), ArityError("mrelease"), InvalidExpireError("macquire"),
		UnknownCommandError([][]byte{[]byte("foo\r\n"), []byte("a\nb")}),
		UnknownSubcommandError("config", []byte("x\r\n")),
		InvalidExpireError("extend"),
		ProtocolErrorReply(&ProtocolError{Msg: "unbalanced quotes in request"}),
		ErrMaxClients, ErrDBIndex, ErrBadProtover, ErrAuthNoPassword, ErrWrongPass, ErrBadClientName,
		ErrUnblockReason, ErrUnblocked, ArityError("client|setname"),
		HelloOptionError([]byte("BOGUS\r\n")), UnrecognizedOptionError([]byte("x\ny")),
		ConfigUnsupportedError("set"), SubscribedOnlyError("ACQUIRE"),
		WaitTooLongError(time.Minute), TooManyEphemeralError(1 << 16),
	}
	for _, e := range wire {
		t.Run(e.Error(), func(t *testing.T) {
			checkWireText(t, e.Error())
			if !documented[e.Code] {
				t.Errorf("code %q is not in ErrorCodes", e.Code)
			}
			if got, known := Reply(e); got != e.Error() || !known {
				t.Errorf("Reply = %q, %v, want %q, true", got, known, e.Error())
			}
		})
	}
	for _, code := range codeConstants(t) {
		if !documented[code] {
			t.Errorf("code %q is not in ErrorCodes", code)
		}
	}
	for _, le := range locker.Errors {
		t.Run(le.Error(), func(t *testing.T) {
			got, _ := Reply(le)
			checkWireText(t, got)
			if code, _, _ := strings.Cut(got, " "); !documented[code] {
				t.Errorf("maps to undocumented code %q", code)
			}
		})
	}
}

func TestUnknownCommandError(t *testing.T) {
	bs := func(ss ...string) [][]byte {
		out := make([][]byte, len(ss))
		for i, s := range ss {
			out[i] = []byte(s)
		}
		return out
	}
	tests := []struct {
		name string
		args [][]byte
		want string
	}{
		{"no args", bs("foo"), "ERR unknown command 'foo', with args beginning with: "},
		{"args, as Redis says it", bs("foo", "a", "b"), "ERR unknown command 'foo', with args beginning with: 'a' 'b' "},
		{"case kept", bs("FoO"), "ERR unknown command 'FoO', with args beginning with: "},
		{"control bytes replaced", bs("f\r\no", "a\nb", "\x00\x7f\x1b"),
			"ERR unknown command 'f??o', with args beginning with: 'a?b' '???' "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := UnknownCommandError(tt.args).Error()
			if got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
			checkWireText(t, got)
		})
	}

	t.Run("bounded", func(t *testing.T) {
		args := [][]byte{[]byte(strings.Repeat("N", 1000))}
		for range 1000 {
			args = append(args, []byte(strings.Repeat("a\r\n", 1000)))
		}
		got := UnknownCommandError(args).Error()
		checkWireText(t, got)
		if len(got) > 512 {
			t.Fatalf("len = %d, want at most 512", len(got))
		}
		if !strings.Contains(got, "'"+strings.Repeat("N", 128)+"'") {
			t.Fatalf("name not cut at 128 bytes: %q", got)
		}
	})
}

func TestUnknownSubcommandError(t *testing.T) {
	got := UnknownSubcommandError("config", []byte("FOO\r\n")).Error()
	if want := "ERR unknown subcommand 'FOO??'. Try CONFIG HELP."; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	long := UnknownSubcommandError("client", []byte(strings.Repeat("x", 1000))).Error()
	if len(long) > 128 {
		t.Fatalf("len = %d, want the subcommand cut", len(long))
	}
}

func TestErrorHelpersLowerCase(t *testing.T) {
	tests := []struct {
		name string
		err  *Error
		want string
	}{
		{"arity upper", ArityError("VERIFY"), "ERR wrong number of arguments for 'verify' command"},
		{"arity mixed", ArityError("AcQuIrE"), "ERR wrong number of arguments for 'acquire' command"},
		{"arity lower", ArityError("extend"), "ERR wrong number of arguments for 'extend' command"},
		{"expire upper", InvalidExpireError("CREATE"), "ERR invalid expire time in 'create' command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestWireErrorsText pins the text of the errors that copy Redis's, so that
// clients matching on it keep working.
func TestWireErrorsText(t *testing.T) {
	tests := []struct {
		err  *Error
		want string
	}{
		{ErrMaxClients, "ERR max number of clients reached"},
		{ErrDBIndex, "ERR DB index is out of range"},
		{ErrBadProtover, "ERR Protocol version is not an integer or out of range"},
		{ErrWrongPass, "WRONGPASS invalid username-password pair or user is disabled."},
		{ErrBadClientName, "ERR Client names cannot contain spaces, newlines or special characters."},
		{ErrUnblockReason, "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"},
		{ArityError("client|ID"), "ERR wrong number of arguments for 'client|id' command"},
		{HelloOptionError([]byte("BOGUS")), "ERR Syntax error in HELLO option 'BOGUS'"},
		{HelloOptionError([]byte("a\r\nb")), "ERR Syntax error in HELLO option 'a??b'"},
		{UnrecognizedOptionError([]byte("FOO")), "ERR Unrecognized option 'FOO'"},
		{ConfigUnsupportedError("set"), "ERR CONFIG SET is not supported: settings are flags, fixed at start"},
		{SubscribedOnlyError("ACQUIRE"), "ERR Can't execute 'acquire': only (P)SUBSCRIBE / (P)UNSUBSCRIBE / PING / QUIT are allowed in this context"},
		{WaitTooLongError(time.Minute), "ERR WAIT must be at most max-ttl (1m0s)"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
	if got, want := string(ErrMaxClients.Frame()), "-ERR max number of clients reached\r\n"; got != want {
		t.Errorf("Frame = %q, want %q", got, want)
	}
	long := HelloOptionError(bytes.Repeat([]byte("x"), 1<<20)).Error()
	if len(long) > 128 {
		t.Errorf("HelloOptionError echoes %d bytes of the client's option", len(long))
	}
}

// codeConstants returns the value of every Code* constant in this package's
// sources, read from the syntax tree so that a code added later is checked
// without anyone remembering to list it.
func codeConstants(t *testing.T) []string {
	t.Helper()
	var codes []string
	for _, f := range parseSources(t) {
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "Code") || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != gotoken.STRING {
					t.Errorf("%s is not a string constant", name.Name)
					continue
				}
				code, _ := strconv.Unquote(lit.Value)
				codes = append(codes, code)
			}
			return true
		})
	}
	if len(codes) < 5 {
		t.Fatalf("found only %d Code constants: %q", len(codes), codes)
	}
	return codes
}

// TestErrorLiteralsUseCodeConstants makes every wire error in this package
// name its code through a Code* constant, which TestWireErrorsFormat checks
// against ErrorCodes, so that no code reaches the wire undocumented.
func TestErrorLiteralsUseCodeConstants(t *testing.T) {
	found := 0
	for _, f := range parseSources(t) {
		ast.Inspect(f, func(n ast.Node) bool {
			cl, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			if id, ok := cl.Type.(*ast.Ident); !ok || id.Name != "Error" {
				return true
			}
			found++
			if len(cl.Elts) == 0 {
				t.Errorf("%s: Error literal without a code", fset.Position(cl.Pos()))
				return true
			}
			code := cl.Elts[0]
			if kv, ok := code.(*ast.KeyValueExpr); ok {
				code = kv.Value
			}
			if id, ok := code.(*ast.Ident); !ok || !strings.HasPrefix(id.Name, "Code") {
				t.Errorf("%s: Error's code is not a Code* constant", fset.Position(cl.Pos()))
			}
			return true
		})
	}
	if found < 10 {
		t.Fatalf("found only %d Error literals; is the parse looking at the right files?", found)
	}
}

var fset = gotoken.NewFileSet()

// parseSources parses this package's non-test Go files.
func parseSources(t *testing.T) []*ast.File {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// lockerReplies is the exact reply to each of the lock table's sentinels:
// what clients see, which must not change when locker's list does.
var lockerReplies = []struct {
	err   error
	reply string
	known bool
}{
	{locker.ErrNoSuchLock, "NOLOCK no such lock", true},
	{locker.ErrInUse, "INUSE lock is held", true},
	{locker.ErrInLockDelay, "INUSE lock is in its lock-delay", true},
	{locker.ErrLockDelayRange, "ERR lock-delay out of range", true},
	{locker.ErrNoTTL, "ERR no ttl given and the lock has no default ttl", true},
	{locker.ErrTTLRange, "ERR ttl out of range", true},
	{locker.ErrEmptyKey, "ERR empty key", true},
	{locker.ErrKeyTooLong, "ERR key too long", true},
	{locker.ErrOwnerTooLong, "ERR owner too long", true},
	{locker.ErrLimitRange, "ERR limit out of range", true},
	{locker.ErrSharedSemaphore, "ERR a semaphore has no shared leases", true},
	{locker.ErrOwnerMode, "ERR owner holds the lock in the other mode", true},
	{locker.ErrDuplicateKey, "ERR a key is named more than once", true},
	{locker.ErrTableFull, "OOM lock table full", true},
	// The table's start and restore: no command meets them, so a client
	// that sees one sees ErrInternal, and the server logs it.
	{locker.ErrClosed, "ERR internal error", false},
	{locker.ErrClockBeforeEpoch, "ERR internal error", false},
	{locker.ErrClockPastTokenRange, "ERR internal error", false},
	{locker.ErrTokenState, "ERR internal error", false},
	{locker.ErrQueueState, "ERR internal error", false},
}

// TestLockerReplies pins the reply to each of the lock table's sentinels,
// bare, wrapped and as a KeyError, and fails for a sentinel of locker.Errors
// whose reply is not pinned.
func TestLockerReplies(t *testing.T) {
	pinned := map[error]bool{}
	for _, tt := range lockerReplies {
		pinned[tt.err] = true
	}
	for _, le := range locker.Errors {
		if !pinned[le] {
			reply, known := Reply(le)
			t.Errorf("%q replies %q (known %v), which lockerReplies does not pin: set its code in lockerCodes if not ERR, then pin it", le, reply, known)
		}
	}
	for _, tt := range lockerReplies {
		t.Run(tt.err.Error(), func(t *testing.T) {
			if got, known := Reply(tt.err); got != tt.reply || known != tt.known {
				t.Errorf("Reply = %q, %v, want %q, %v", got, known, tt.reply, tt.known)
			}
			wrapped, wantWrapped := fmt.Errorf("%w: 5", tt.err), tt.reply+": 5"
			keyed, wantKeyed := &locker.KeyError{Key: "k", Err: tt.err}, tt.reply+` "k"`
			if !tt.known {
				wantWrapped, wantKeyed = tt.reply, tt.reply
			}
			if got, _ := Reply(wrapped); got != wantWrapped {
				t.Errorf("Reply(wrapped) = %q, want %q", got, wantWrapped)
			}
			if got, _ := Reply(keyed); got != wantKeyed {
				t.Errorf("Reply(KeyError) = %q, want %q", got, wantKeyed)
			}
		})
	}
}
