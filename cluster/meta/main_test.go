package meta

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := m.Run()
	// The shared etcd server outlives the tests that use it; stop it before
	// looking for leaked goroutines.
	if err := closeSharedEtcd(); err != nil {
		fmt.Fprintln(os.Stderr, "closing the shared etcd:", err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
