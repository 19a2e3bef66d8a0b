package agent

import (
	"errors"
	"fmt"
	"os"

	"github.com/srchain/srchain/internal/state"
)

// Applied returns what the agent's files at stateFile say the node may
// hold (the state file and any intent, as at start), for `agent
// --uninstall` to remove through the drivers; nil when they say nothing
// readable, with the problems found.
func Applied(stateFile string) (*state.Node, []error) {
	rec := readRecord(stateFile)
	return rec.node, rec.problems
}

// RemoveFiles removes the agent's state and intent files of stateFile
// (missing ones are fine).
func RemoveFiles(stateFile string) error {
	var errs []error
	for _, p := range []string{stateFile, intentPath(stateFile)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove agent state: %w", err))
		}
	}
	return errors.Join(errs...)
}
