package main

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/srchain/srchain/internal/controller"
	"github.com/srchain/srchain/internal/spec"
)

// remoteOptions are the flags of every command that talks to `serve`.
type remoteOptions struct {
	server, tokenFile string
}

func (o *remoteOptions) flags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.server, "server", envOr("SRCHAIN_SERVER", defaultServer), "controller URL ($SRCHAIN_SERVER)")
	cmd.Flags().StringVar(&o.tokenFile, "token-file", "", "API token file (default $SRCHAIN_TOKEN, else "+defaultDataDir+"/token)")
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// client reads the token: --token-file, $SRCHAIN_TOKEN, or the file
// serve generates by default.
func (o *remoteOptions) client() (*controller.Client, error) {
	tok := os.Getenv("SRCHAIN_TOKEN")
	if o.tokenFile != "" || tok == "" {
		f := o.tokenFile
		if f == "" {
			f = filepath.Join(defaultDataDir, "token")
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read token: %w", err)
		}
		tok = strings.TrimSpace(string(b))
	}
	return &controller.Client{Server: o.server, Token: tok}, nil
}

func newApplyCmd(e *env) *cobra.Command {
	var o remoteOptions
	var file string
	var prune bool
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Push a spec's topology, NFs and chains to the controller",
		Long: "apply validates FILE locally (every problem with file:line:col), then sends its\n" +
			"objects to the controller (`srchain serve`), which creates or replaces each by\n" +
			"name in one transaction; objects the file does not mention stay, unless\n" +
			"--prune makes the file the whole spec. Lab traffic (probes) is not sent.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if file == "" {
				return fmt.Errorf("apply: -f FILE is required")
			}
			if _, err := spec.Load(file); err != nil {
				return specProblems(cmd, err)
			}
			data, err := os.ReadFile(file)
			if err != nil {
				return fmt.Errorf("read spec: %w", err)
			}
			doc, err := controller.DocFromYAML(data)
			if err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			cl, err := o.client()
			if err != nil {
				return err
			}
			method := "PATCH"
			if prune {
				method = "PUT"
			}
			var res controller.Result
			if err := cl.Do(cmd.Context(), method, "/v1/spec", doc, &res); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "applied %s: spec revision %d, %d nodes changed %v, %d removed %v\n",
				file, res.Revision, len(res.Changed), res.Changed, len(res.Removed), res.Removed)
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "spec file (YAML)")
	cmd.Flags().BoolVar(&prune, "prune", false, "replace the whole spec: delete objects not in FILE")
	o.flags(cmd)
	return cmd
}

func newDeleteCmd(e *env) *cobra.Command {
	var o remoteOptions
	cmd := &cobra.Command{
		Use:   "delete chains|nodes|nfs|links NAME",
		Short: "Delete one object from the controller's spec",
		Long: "delete removes one object; the controller refuses (and prints every reason)\n" +
			"when the spec would become invalid, e.g. deleting an NF that a chain uses.",
		Args:      cobra.ExactArgs(2),
		ValidArgs: controller.Kinds,
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := o.client()
			if err != nil {
				return err
			}
			var res controller.Result
			if err := cl.Do(cmd.Context(), "DELETE", "/v1/"+args[0]+"/"+url.PathEscape(args[1]), nil, &res); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted %s/%s: spec revision %d, %d nodes changed %v\n",
				args[0], args[1], res.Revision, len(res.Changed), res.Changed)
			return nil
		},
	}
	o.flags(cmd)
	return cmd
}
