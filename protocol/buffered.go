package protocol

import (
	"reflect"
	"unsafe"

	"github.com/tidwall/redcon"
)

// BufferedReplies returns how many reply bytes w holds unflushed. redcon's
// Writer does not say (its Buffer copies them), and the server's
// runCommands asks after every command, so this reads the length of its
// buffer directly, at the offset found once at start: a redcon that renamed
// the field fails replyBufferOffset's check at init, not silently.
func BufferedReplies(w *redcon.Writer) int {
	return len(*(*[]byte)(unsafe.Add(unsafe.Pointer(w), replyBufferOffset)))
}

var replyBufferOffset = func() uintptr {
	f, ok := reflect.TypeFor[redcon.Writer]().FieldByName("b")
	if !ok || f.Type != reflect.TypeFor[[]byte]() {
		panic("protocol: redcon.Writer has no buffer field b []byte; BufferedReplies needs updating")
	}
	return f.Offset
}()
