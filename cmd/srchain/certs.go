package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/srchain/srchain/internal/pki"
)

func newCertsCmd() *cobra.Command {
	var dir string
	var nodes, hosts []string
	cmd := &cobra.Command{
		Use:   "certs --dir DIR --nodes N1,N2,...",
		Short: "Generate the certificates of a deployment's mutual TLS with etcd",
		Long: "certs writes into DIR a CA, a server certificate for etcd (localhost,\n" +
			"127.0.0.1, ::1 and --hosts), a client certificate for the controller (root)\n" +
			"and one per node (common name = node name: the node's etcd user, which reaches\n" +
			"only that node's keys). ECDSA P-256 keys, 0600; existing files are never\n" +
			"overwritten. Use them with `srchain serve --etcd-pki DIR` and `srchain agent\n" +
			"--etcd-pki DIR` (docs/controller.md, Security).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := pki.Generate(dir, nodes, hosts); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "certificates for root and %d nodes in %s\n", len(nodes), dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "output directory (required)")
	cmd.Flags().StringSliceVar(&nodes, "nodes", nil, "node names (comma-separated)")
	cmd.Flags().StringSliceVar(&hosts, "hosts", nil, "more names or addresses etcd is reached at")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}
