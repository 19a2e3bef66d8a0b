package main

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/spf13/cobra"

	"github.com/srchain/srchain/internal/compile"
	_ "github.com/srchain/srchain/internal/kinds/all" // every NF kind
	"github.com/srchain/srchain/internal/spec"
	"github.com/srchain/srchain/internal/state"
)

// errInvalidSpec is returned after the problems have been printed, so main
// only adds a one-line summary.
var errInvalidSpec = errors.New("invalid spec")

func newValidateCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check specs and print every problem with its file:line:col and field path",
		Long: "validate decodes each spec strictly, checks its meaning (references, addressing,\n" +
			"SIDs, MTU budget, paths) and compiles it. It prints every problem found and\n" +
			"exits 1 if there is any.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			bad, unreadable := 0, 0
			for _, f := range args {
				s, _, err := loadAndCompile(f)
				if err != nil && isReadError(err) && len(args) == 1 {
					return err
				}
				if err != nil {
					bad++
					if isReadError(err) {
						unreadable++
					}
					printProblems(cmd, err)
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: ok (%d nodes, %d links, %d NFs, %d chains)\n",
					f, len(s.Nodes), len(s.Links), len(s.NFs), len(s.Chains))
			}
			switch {
			case bad > 0 && bad == unreadable:
				return fmt.Errorf("%d of %d specs could not be read", bad, len(args))
			case unreadable > 0:
				return fmt.Errorf("%d of %d specs could not be read; %d of %d: %w", unreadable, len(args), bad-unreadable, len(args), errInvalidSpec)
			case bad > 0:
				return fmt.Errorf("%d of %d specs: %w", bad, len(args), errInvalidSpec)
			}
			return nil
		},
	}
}

// loadAndCompile loads, validates and compiles one spec file.
func loadAndCompile(path string) (*spec.Spec, *state.Network, error) {
	s, err := spec.Load(path)
	if err != nil {
		return nil, nil, err
	}
	net, err := compile.Compile(s)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, net, nil
}

// isReadError reports whether err is about reading the spec file (missing,
// unreadable, a directory) rather than about its content.
func isReadError(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe)
}

// specProblems is how a command that needs one valid spec reports a load
// or compile failure: a file that cannot be read is returned as is
// ("read spec /x.yaml: no such file or directory"); spec problems are
// printed one per line and summarized as errInvalidSpec.
func specProblems(cmd *cobra.Command, err error) error {
	if isReadError(err) {
		return err
	}
	printProblems(cmd, err)
	return errInvalidSpec
}

// printProblems writes one line per spec problem to stderr.
func printProblems(cmd *cobra.Command, err error) {
	fes := spec.FieldErrors(err)
	if len(fes) == 0 {
		fmt.Fprintln(cmd.ErrOrStderr(), err)
		return
	}
	for _, fe := range fes {
		fmt.Fprintln(cmd.ErrOrStderr(), fe)
	}
}
