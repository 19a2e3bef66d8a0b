package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at build time: `make dist` and scripts/deb.sh pass
// -ldflags "-X main.version=$(git describe --tags --always --dirty)".
var version = "dev"

// versionString is what both `srchain version` and `srchain --version`
// print after "srchain ". A plain `go build` leaves version at "dev": the
// VCS revision Go stamps into the binary (when it was built inside a git
// checkout with -buildvcs on) then tells which source it is.
func versionString() string {
	if version != "dev" {
		return version
	}
	rev, dirty := "", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		// `go install github.com/srchain/srchain/cmd/srchain@v1.2.0`
		// stamps no VCS settings but the module's version.
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			rev = v
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "-dirty"
				}
			}
		}
	}
	if rev == "" {
		return version
	}
	return version + " " + rev + dirty
}

func newVersionCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the srchain version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "srchain %s\n", versionString())
			return nil
		},
	}
}
