// Command srchain deploys and runs SRv6 service function chains on Linux.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := rootCmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "srchain:", err)
		os.Exit(1)
	}
}
