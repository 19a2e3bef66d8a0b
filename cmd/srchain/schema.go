package main

import (
	"github.com/spf13/cobra"

	"github.com/srchain/srchain/internal/spec"
)

func newSchemaCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON schema (Draft 2020-12) of the spec, for editors",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := cmd.OutOrStdout().Write(spec.Schema)
			return err
		},
	}
}
