package testkit

import (
	"bytes"
	"strings"
	"sync"
	"testing"
)

// failureLogLines is how many of its last lines a FailureLog shows.
const failureLogLines = 400

// FailureLog returns a writer for the logs of what a test starts (a
// slog handler's, say) that keeps them, and logs their last lines through
// t when the test has failed: a rare failure then tells its story, while a
// passing test prints nothing. Writes after the test has ended are kept
// and never shown, so goroutines that outlive the test may still log.
func FailureLog(t testing.TB) *LogBuffer {
	b := &LogBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the last %d lines of the log:\n%s", failureLogLines, b.tail(failureLogLines))
		}
	})
	return b
}

// LogBuffer is FailureLog's writer, safe for concurrent writes.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// tail is the last n lines written.
func (b *LogBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	lines := strings.Split(strings.TrimSuffix(b.buf.String(), "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}
